"""The calls of ``torch.sparse`` (``torch.sparse.mm``, ``.sum``, ``.softmax``: a GCN's propagation) are torch-level
calls named as such, like those of ``torch.linalg``; they were named after their operators (``aten::_sparse_mm``),
and the namespace is put back exactly."""

import pytest

torch = pytest.importorskip("torch")
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


class Propagates(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, adjacency, x):
        degree = torch.sparse.sum(adjacency, dim=1).to_dense()
        return torch.sparse.mm(torch.sparse.softmax(adjacency, 1), self.fc(x)) * degree[:, None]


def test_torch_sparse_calls_are_named_and_put_back():
    before = dict(vars(torch.sparse))
    adjacency = (torch.rand(5, 5) > 0.5).float().to_sparse()
    frame, data = ModuleFunctionKernelProfiler().profile(Propagates(), [((adjacency, torch.randn(5, 4)), {})],
                                                         warmup_iterations=1)  # fmt: skip
    named = set(frame["function_name"].dropna())
    assert {"torch.sparse.mm", "torch.sparse.sum", "torch.sparse.softmax", "linear"} <= named, named
    assert not any(name.startswith("aten::") for name in named), named
    assert all([calls for calls, _ in data[name]] == [1] for name in ("torch.sparse.mm", "torch.sparse.sum"))
    assert vars(torch.sparse).keys() == before.keys() and all(vars(torch.sparse)[k] is v for k, v in before.items())
