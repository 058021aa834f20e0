"""The observed hierarchy is told apart by identity: modules of a class that defines ``__eq__`` and ``__hash__`` by
value (two children configured alike) are one for ``named_modules()``'s memo, and the second child's calls were
named after its parent."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.hierarchy import observed_modules  # noqa: E402
from torch import nn  # noqa: E402


class ByValue(nn.Linear):
    """Equal when of one shape: a dataclass-like module."""

    def __eq__(self, other):
        return type(other) is ByValue and other.weight.shape == self.weight.shape

    def __hash__(self):
        return hash(tuple(self.weight.shape))

    def forward(self, x):
        return F.gelu(super().forward(x))


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = ByValue(8, 8), ByValue(8, 8)
        self.again = self.a  # one module at two paths: still listed once, at its first

    def forward(self, x):
        return self.b(self.a(x))


def test_observed_modules_lists_modules_equal_by_value_once_each_and_a_shared_one_once():
    model = Pair()
    names = [name for name, _ in observed_modules(model)]
    assert names == ["", "a", "b"]
    assert [name for name, _ in model.named_modules()] == ["", "a"]  # torch's own memo: b is a's equal


def test_calls_of_modules_equal_by_value_are_named_after_each_module():
    model = Pair().eval()
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2, 8),), {})], warmup_iterations=1)
    assert set(frame.loc[frame["function_name"] == "gelu", "module_name"]) == {"a", "b"}
    assert set(frame.loc[frame["function_name"] == "linear", "module_name"]) == {"a", "b"}
    assert frame.loc[frame["module_name"] == "b", "module"].map(id).eq(id(model.b)).all()
