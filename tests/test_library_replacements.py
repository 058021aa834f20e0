"""Functions a library bound in torch's namespaces before the recording, in place of torch's (``torch.matmul =
fast_matmul``, ``torch.bmm = triton_bmm``, ``torch.linalg.norm = ...``, ``torch.Tensor.softmax = ...``, a
``functools.partial`` or an object with ``__call__`` in ``torch.nn.functional``): each is scoped by the name it is
called by, holding the torch calls it makes, as a functional a library bound in ``torch.nn.functional`` is
(tests/test_unusual_models_more.py); they were named after the torch calls inside them."""

import functools

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


def _fast_matmul(a, b, *, out=None):
    return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2)


def _library_bmm(a, b):
    return torch.einsum("bij,bjk->bik", a, b)


def _library_norm(x, *args, **kwargs):
    return x.pow(2).sum().sqrt()


def _library_softmax(self, dim, dtype=None):
    shifted = (self - self.amax(dim, keepdim=True)).exp()
    return shifted / shifted.sum(dim, keepdim=True)


class UsesReplacedCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        y = torch.matmul(self.proj(x), x.t())
        z = torch.bmm(y[None], y[None])
        return z.softmax(-1) + torch.linalg.norm(z)


def test_torch_functions_a_library_replaced_are_scoped_by_their_names(monkeypatch):
    replaced = [(torch, "matmul", _fast_matmul), (torch, "bmm", _library_bmm), (torch.linalg, "norm", _library_norm),
                (torch.Tensor, "softmax", _library_softmax)]  # fmt: skip
    for owner, name, replacement in replaced:
        monkeypatch.setattr(owner, name, replacement)
    frame, data = ModuleFunctionKernelProfiler().profile(UsesReplacedCalls(), [((torch.randn(4, 8),), {})],
                                                         warmup_iterations=1)  # fmt: skip
    named = set(frame["function_name"].dropna())
    assert {"torch.matmul", "torch.bmm", "torch.linalg.norm", "Tensor.softmax"} <= named, named
    assert not named & {"torch.einsum", "Tensor.sum", "Tensor.pow", "Tensor.sqrt", "Tensor.__mul__"}, named
    for name in ("torch.matmul", "torch.bmm", "torch.linalg.norm", "Tensor.softmax"):
        assert [calls for calls, _ in data[name]] == [1], name
    assert torch.matmul is _fast_matmul and torch.linalg.norm is _library_norm
    assert torch.Tensor.softmax is _library_softmax


class CallableAttention:
    def __call__(self, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        return torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v


class UsesReplacedFunctionals(nn.Module):
    def forward(self, x):
        return F.gelu(F.scaled_dot_product_attention(x, x, x))


def test_a_partial_and_a_callable_object_a_library_bound_in_the_functional_namespace_are_scoped(monkeypatch):
    tanh_gelu, attention = functools.partial(F.gelu, approximate="tanh"), CallableAttention()
    monkeypatch.setattr(F, "gelu", tanh_gelu)  # a library forcing the tanh approximation
    monkeypatch.setattr(F, "scaled_dot_product_attention", attention)
    frame, data = ModuleFunctionKernelProfiler().profile(UsesReplacedFunctionals(), [((torch.randn(1, 4, 8),), {})],
                                                         warmup_iterations=1)  # fmt: skip
    named = set(frame["function_name"].dropna())
    assert {"gelu", "scaled_dot_product_attention"} <= named, named
    assert not named & {"torch.softmax", "Tensor.__matmul__", "aten::gelu"}, named
    assert [calls for calls, _ in data["scaled_dot_product_attention"]] == [1] == [c for c, _ in data["gelu"]]
    assert F.gelu is tanh_gelu and F.scaled_dot_product_attention is attention
