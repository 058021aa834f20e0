"""Calls of a loaded AOTInductor package (``torch._inductor.aoti_load_package(path)``) are calls named
``AOTICompiledModel.__call__``: its code launches its kernels from C++, where no torch operator holds them.

Compiling a package takes longer than a test may, so torch's own ``AOTICompiledModel`` runs here over a loader that
stands in for the compiled one (``get_call_spec`` and ``boxed_run``, the two its ``__call__`` uses), whose "kernels"
are CPU work, which the CPU trace has as operators. benchmarks/sweep_cpu_mechanisms_unseen.py (aoti_as_model,
aoti_in_forward) records real packages.
"""

import pytest

torch = pytest.importorskip("torch")
package = pytest.importorskip("torch.export.pt2_archive._package")
import torch.utils._pytree as pytree  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.replay import NotReplayable, resolve_call  # noqa: E402
from torch import nn  # noqa: E402


class StandInLoader:
    def __init__(self, x):
        self.spec = (pytree.treespec_dumps(pytree.tree_flatten(((x,), {}))[1]),
                     pytree.treespec_dumps(pytree.tree_flatten(x)[1]))  # fmt: skip

    def get_call_spec(self):
        return self.spec

    def boxed_run(self, inputs):
        return [torch.tanh(inputs[0]) * 2]  # the package's kernels


class HoldsPackage(nn.Module):
    def __init__(self, runner):
        super().__init__()
        self.runner, self.head = runner, nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.runner(x))


def test_a_packages_calls_are_its_own_in_the_module_that_calls_it():
    x = torch.randn(4, 16)
    model = HoldsPackage(package.AOTICompiledModel(StandInLoader(x))).eval()
    expected = model(x)
    original = vars(package.AOTICompiledModel)["__call__"]
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((x,), {})], warmup_iterations=1)
    assert vars(package.AOTICompiledModel)["__call__"] is original
    assert torch.equal(model(x), expected)
    rows = frame[frame["op"].isin(["aten::tanh", "aten::mul"])]
    assert set(rows["function_name"]) == {"AOTICompiledModel.__call__"}
    assert set(rows["module_name"]) == {""}
    assert set(frame.loc[frame["op"] == "aten::addmm", "function_name"]) == {"linear"}
    [(calls, (args, kwargs))] = data["AOTICompiledModel.__call__"]
    assert calls == 1 and args[0] is model.runner and torch.equal(args[1], x) and kwargs == {}


def test_a_packages_call_is_refused_for_replay_with_its_reason():
    with pytest.raises(NotReplayable, match="AOTInductor package ran the model's own compiled code"):
        resolve_call("AOTICompiledModel.__call__")
