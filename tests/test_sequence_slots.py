"""A class's sequence slots (CPython's ``sq_item`` and ``sq_ass_item``) stay as they were while the recorder puts its
``torch.Tensor.__getitem__`` and ``__setitem__`` in place and after it takes them away: setting ``__getitem__`` on a
class in Python fills its ``sq_item``, and removing it again leaves a generic one where the C base (``TensorBase``)
had only the mapping slot, so a tensor would pass for a sequence (``PySequence_Check``) and ``torch.tensor`` of a
list of 0-d tensors (as transformers' watermarking makes) would ask each element for its ``len()``."""

import pytest

torch = pytest.importorskip("torch")
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


class Marked(torch.Tensor):
    """A tensor subclass made before the recording: the slots of torch.Tensor's subclasses change with its own."""


class Passing(torch.overrides.TorchFunctionMode):
    """A mode whose handler gets ``Tensor.__getitem__``: while it runs, torch.Tensor holds the original again."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class Gathers(nn.Module):
    def __init__(self, made_while_recorded: list):
        super().__init__()
        self.made = made_while_recorded

    def forward(self, x):
        x[1] = x[3]  # Tensor.__setitem__
        with Passing():
            x[2] = x[2] + x[0]
        picked = torch.tensor([x[0], x[1], x[2]])  # 0-d tensors, each from Tensor.__getitem__
        marked = x[:2].as_subclass(Marked)
        if not self.made:  # a subclass made while the recording's patches are in place
            self.made.append(type("MadeWhileRecorded", (torch.Tensor,), {}))
        made = x[:2].as_subclass(self.made[0])
        return picked * 2, torch.tensor([marked[0], marked[1]]), torch.tensor([made[0], made[1]])


def _tensors_of_scalars() -> list:
    x = torch.arange(4.0)
    return [torch.tensor([x[0], x[1]]), torch.tensor([x[0:2].as_subclass(Marked)[1]])]


def test_tensors_of_zero_dim_tensors_while_and_after_recorded():
    made: list = []
    model = Gathers(made)
    expected = model(torch.arange(4.0))
    profiler = ModuleFunctionKernelProfiler()
    frame, _ = profiler.profile(model, [((torch.arange(4.0),), {})], warmup_iterations=1)
    profiler.release()
    assert {"Tensor.__getitem__", "Tensor.__setitem__"} <= set(frame["function_name"])  # still scoped
    for got, want in zip(model(torch.arange(4.0)), expected, strict=True):
        assert torch.equal(got, want)
    assert [t.tolist() for t in _tensors_of_scalars()] == [[0.0, 1.0], [1.0]]
    made_after = torch.arange(2.0).as_subclass(made[0])
    assert torch.tensor([made_after[0], made_after[1]]).tolist() == [0.0, 1.0]
