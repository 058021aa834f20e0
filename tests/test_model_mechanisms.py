"""Models built on torch mechanisms that profile() got wrong: a model that works out its output's shape under a
FakeTensorMode (its functional calls took FakeTensors, which torch.save cannot write: profile() crashed writing
samples.pt)."""

import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.analyzer.samples import TensorMeta  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


class ShapeFirst(nn.Module):
    """Works out the shape of its output with fake tensors, then allocates it and computes it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            shape = F.linear(mode.from_tensor(x), self.fc.weight).shape
        return torch.zeros(shape) + self.fc(x)


def test_calls_made_with_fake_tensors_are_left_out_of_samples_pt(tmp_path):
    model, x = ShapeFirst().eval(), torch.randn(2, 8)
    expected = model(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, data = ModuleFunctionKernelProfiler().profile(model, [((x,), {})], out=tmp_path / "run")
    messages = [str(warning.message) for warning in caught]
    assert any("FakeTensor): samples.pt leaves them out" in message for message in messages)
    assert not any("data pointer" in message for message in messages), "the recorder reads no fake data pointer"
    assert torch.equal(model(x), expected)
    live = [args[0] for _, (args, _) in data["linear"]]
    assert {type(tensor).__name__ for tensor in live} == {"FakeTensor", "Tensor"}
    with load_run(tmp_path / "run") as run:
        saved = [args[0] for _, (args, _) in run.function_data(tensors=True)["linear"]]
    kinds = [isinstance(tensor, TensorMeta) for tensor in saved]
    assert kinds == [type(tensor).__name__ == "FakeTensor" for tensor in live], "only the fake call is left out"
    assert torch.equal(saved[kinds.index(False)], live[kinds.index(False)])
