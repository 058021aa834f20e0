"""A recording with module scopes only (profile()'s way out when compiled code cannot be kept: the functions
unpatched) runs a module's hooks in its scope like any other: those it had, those registered and those written
straight into its hook dicts at each call (recorder/hooked_calls.py)."""

import types
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from conftest import assert_patches_undone, snapshot_patch_targets  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


def _doubled(x):
    return x * 2


def _silu_input(module, args):
    return (F.silu(args[0]),)


class HookedEveryWayAndCompilingAnew(nn.Module):
    """Compiles new code at every pass (so only modules are scoped); hooks its children anew around each call, one
    by registration and one written into the hook dict, and has a pre-hook on its head from the start."""

    def __init__(self):
        super().__init__()
        self.fc, self.tap, self.head = nn.Linear(8, 8), nn.Identity(), nn.Linear(8, 4)
        self.head.register_forward_pre_hook(lambda module, args: (F.hardtanh(args[0]),))

    def forward(self, x):
        handle = self.fc.register_forward_pre_hook(_silu_input)
        self.tap._forward_hooks[10_005] = lambda module, args, out: F.elu(out)
        step = torch.compile(types.FunctionType(_doubled.__code__.replace(), globals()), backend="eager")
        try:
            return self.head(step(self.tap(self.fc(x))))
        finally:
            handle.remove()
            del self.tap._forward_hooks[10_005]


@pytest.mark.parametrize("warm_ups", [0, 1])
def test_hooks_run_in_the_scope_of_their_module_with_module_scopes_only(warm_ups):
    model = HookedEveryWayAndCompilingAnew().eval()
    before = snapshot_patch_targets(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profiler = ModuleFunctionKernelProfiler()
        frame, _ = profiler.profile(model, [((torch.randn(4, 8),), {})], warmup_iterations=warm_ups)
    assert profiler.run.manifest["compiled_code"] == "module_scopes_only", [str(w.message) for w in caught]
    modules = frame.groupby("op")["module_name"].agg(lambda names: set(names.astype(str)))
    assert modules["aten::silu"] == {"fc"}, "a pre-hook registered at each call is its module's"
    assert modules["aten::elu"] == {"tap"}, "a hook written into the hook dict at each call is its module's"
    assert modules["aten::hardtanh"] == {"head"}, "a pre-hook it had before is its module's"
    assert not any("_call_impl" in vars(m) for m in model.modules())
    assert_patches_undone(model, before)
