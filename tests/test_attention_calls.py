"""The attention functions of ``torch.nn.attention`` (``flex_attention``, ``create_block_mask``) are torch-level
calls named after their namespace, like those of ``torch.linalg``: their kernels were named after the calls they
make inside (``torch.compile``, ``Tensor.__add__`` of a score_mod, ``torch.where``), and the namespace is put back
exactly, also where the model's own module imported the function by name."""

import pytest

torch = pytest.importorskip("torch")
flex = pytest.importorskip("torch.nn.attention.flex_attention")
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: E402

FLEX = "torch.nn.attention.flex_attention."


class Attends(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.qkv(x).view(1, 16, 3, 2, 8).permute(2, 0, 3, 1, 4)
        mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, 16, 16, device="cpu", BLOCK_SIZE=8)
        return flex_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s + (qi - ki) * 0.1, block_mask=mask)


def test_flex_attention_calls_are_named_and_put_back():
    model, x = Attends(), torch.randn(1, 16, 16)
    with torch.no_grad():  # its eager path compiles once, which adds the compiled code to the namespace
        model(x)
    before = dict(vars(flex))
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((x,), {})],
                                                         warmup_iterations=1)  # fmt: skip
    named = set(frame["function_name"].dropna())
    assert {FLEX + "flex_attention", FLEX + "create_block_mask", "linear"} <= named, named
    assert not any(name.startswith(("Tensor.", "torch.compile", "torch.where")) for name in named), named
    assert [calls for calls, _ in data[FLEX + "flex_attention"]] == [1]
    assert vars(flex).keys() == before.keys() and all(vars(flex)[k] is v for k, v in before.items())
    assert globals()["flex_attention"] is flex.flex_attention
