"""Models built on torch mechanisms that profile() got wrong: a model that works out its output's shape under a
FakeTensorMode (its functional calls took FakeTensors, which torch.save cannot write: profile() crashed writing
samples.pt), and a model that makes an object of identity equality in every pass (a torch.Generator, a cache
of its own handed to a compiled block, as transformers' DynamicCache: each pass's was a signature of its own, so the
warm-up's prediction of the recorded pass was wrong and the model ran one pass more)."""

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


class Cache:
    """A cache made afresh by every forward, as transformers' DynamicCache."""


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, cache):
        return self.fc(x)


class FreshObjects(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.compile(Block(), backend="eager")

    def forward(self, x):
        noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(0))
        return self.block(x + noise, cache=Cache())


def test_objects_made_afresh_in_every_pass_are_one_signature():
    model, x = FreshObjects().eval(), torch.randn(2, 8)
    expected = model(x)
    profiler = ModuleFunctionKernelProfiler()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        _, data = profiler.profile(model, [((x,), {})])
    assert profiler.run.manifest["sample_keys"] == "predicted"
    assert [calls for calls, _ in data["torch.randn"]] == [1] and [calls for calls, _ in data["torch.compile"]] == [1]
    assert torch.equal(model(x), expected)
