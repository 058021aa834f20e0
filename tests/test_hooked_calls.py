"""A module's forward pre-hooks and forward hooks are its work: what they compute is recorded in its scope (the mask
product of torch.nn.utils.prune, spectral_norm's power iteration, a hook on an nn.Identity tap, a global hook, hooks
written straight into a module's hook dicts), and the scoped calls are put back exactly, also in a copy or a pickle
the model takes while recorded."""

import copy
import io

import pytest

torch = pytest.importorskip("torch")
from conftest import assert_patches_undone, snapshot_patch_targets  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402, N812
from torch.nn.utils import prune  # noqa: E402


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.tap, self.head = nn.Linear(8, 8), nn.Identity(), nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.tap(F.gelu(self.fc(x))))


def hooked_block() -> Block:
    block = Block().eval()
    prune.l1_unstructured(block.fc, "weight", amount=0.5)  # a pre-hook: weight = weight_orig * mask
    torch.nn.utils.spectral_norm(block.head)  # a pre-hook: a power iteration (torch.mv) and a division
    block.tap.register_forward_hook(normalized)
    return block


def modules_of(frame, function: str) -> set:
    return set(frame.loc[frame["function_name"] == function, "module_name"].astype(str))


def test_forward_hooks_are_recorded_in_the_scope_of_their_module():
    frame, _ = ModuleFunctionKernelProfiler().profile(hooked_block(), [((torch.randn(4, 8),), {})])
    assert modules_of(frame, "Tensor.__mul__") == {"fc"}, "prune's mask product is the pruned Linear's"
    assert modules_of(frame, "torch.mv") == {"head"}, "spectral_norm's power iteration is the normalized Linear's"
    assert modules_of(frame, "normalize") == {"tap"}, "a hook on an Identity is the Identity's"
    assert modules_of(frame, "linear") == {"fc", "head"} and modules_of(frame, "gelu") == {""}


def test_global_hooks_are_recorded_in_the_scope_of_the_module_they_fire_for():
    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 8), nn.LayerNorm(8)).eval()
    handle = nn.modules.module.register_module_forward_hook(
        lambda module, args, out: F.hardtanh(out) if isinstance(module, nn.LayerNorm) else None
    )
    try:
        frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 8),), {})])
    finally:
        handle.remove()
    assert modules_of(frame, "hardtanh") == {"1", "3"} and sum(calls for calls, _ in data["hardtanh"]) == 2


def silu_input(module, args):  # module-level, so that pickle writes it by name
    return (F.silu(args[0]),)


def normalized(module, args, out):
    return F.normalize(out, dim=-1)


class CopiesItsChild(nn.Module):
    """Deep-copies and pickles its hooked child while recorded, and calls the copy."""

    def __init__(self):
        super().__init__()
        self.block, self.copies_had_patches = Block().eval(), []  # prune's and spectral_norm's weights never copy
        self.block.fc.register_forward_pre_hook(silu_input)
        self.block.tap.register_forward_hook(normalized)

    def forward(self, x):
        twin = copy.deepcopy(self.block)
        torch.save(self.block, io.BytesIO())  # a pickle: the scoped call, a closure, would not pickle
        self.copies_had_patches.append(any("_call_impl" in vars(m) for m in twin.modules()))
        return self.block(x) + twin(x)


def test_scoped_calls_are_put_back_and_never_copied():
    model = CopiesItsChild().eval()
    x = torch.randn(4, 8)
    with torch.no_grad():
        expected = model(x)
    before = snapshot_patch_targets(model)
    ModuleFunctionKernelProfiler().profile(model, [((x,), {})])
    assert_patches_undone(model, before)
    assert not any("_call_impl" in vars(m) for m in model.modules())
    assert model.copies_had_patches and not any(model.copies_had_patches)
    with torch.no_grad():
        assert torch.equal(model(x), expected)


class HooksItsChildren(nn.Module):
    """Registers hooks on its children at its first call, and a global hook and a new child forward at its second."""

    def __init__(self):
        super().__init__()
        self.fc, self.tap, self.head, self.handles = nn.Linear(8, 8), nn.Identity(), nn.Linear(8, 4), []
        self.calls = [0]

    def forward(self, x):
        self.calls[0] += 1
        if self.calls[0] == 1:
            self.fc.register_forward_pre_hook(silu_input)
            self.tap.register_forward_hook(normalized)
        if self.calls[0] == 2:
            self.handles.append(
                nn.modules.module.register_module_forward_hook(
                    lambda module, args, out: F.hardtanh(out) if module is self.head else None
                )
            )
            plain = self.head.forward
            self.head.forward = lambda y: plain(F.softsign(y))
        return self.head(self.tap(self.fc(x)))


@pytest.mark.parametrize("warm_ups", [0, 1])
def test_hooks_and_forwards_set_while_recorded_run_in_the_scope_of_their_module(warm_ups):
    model = HooksItsChildren().eval()
    x = torch.randn(4, 8)
    before = snapshot_patch_targets(model)
    samples = [((x,), {})] * (2 - warm_ups)  # the first call in the recorded pass, or in the patched warm-up
    try:
        frame, _ = ModuleFunctionKernelProfiler().profile(model, samples, warmup_iterations=warm_ups)
    finally:
        model.handles.pop().remove()
    assert modules_of(frame, "silu") == {"fc"}, "a pre-hook registered at the first call is its module's"
    assert modules_of(frame, "normalize") == {"tap"}, "a hook registered at the first call is its module's"
    assert modules_of(frame, "hardtanh") == {"head"}, "a global hook registered while recorded is its module's"
    assert modules_of(frame, "softsign") == {"head"}, "a forward set while recorded is its module's"
    assert not any("_call_impl" in vars(m) for m in model.modules())
    head = vars(model.head).pop("forward")  # the model's own binding is kept
    assert head.__name__ == "<lambda>"
    assert_patches_undone(model, before)


class WritesHookDicts(nn.Module):
    """Hooks written straight into the hook dicts, no registration call (as some libraries do), at its first call."""

    def __init__(self, at_first_call: bool):
        super().__init__()
        self.fc, self.head, self.pending = nn.Linear(8, 8), nn.Linear(8, 4), [at_first_call]
        if not at_first_call:
            self.write_hooks()

    def write_hooks(self):
        self.fc._forward_hooks[10_001] = lambda module, args, out: F.silu(out)
        self.head._forward_pre_hooks[10_002] = lambda module, args: (F.softsign(args[0]),)
        self.pending[0] = False

    def forward(self, x):
        if self.pending[0]:
            self.write_hooks()
        return self.head(self.fc(x))


@pytest.mark.parametrize("warm_ups", [0, 1])
@pytest.mark.parametrize("at_first_call", [False, True])
def test_hooks_written_into_the_hook_dicts_run_in_the_scope_of_their_module(at_first_call, warm_ups):
    """Before profile(), in the patched warm-up pass, or in the recorded pass itself (no warm-up): a module's scoped
    call reads its hook dicts as torch's does, at each call (recorder/hooked_calls.py)."""
    model = WritesHookDicts(at_first_call).eval()
    before = snapshot_patch_targets(model)
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 8),), {})], warmup_iterations=warm_ups)
    assert modules_of(frame, "silu") == {"fc"} and modules_of(frame, "softsign") == {"head"}
    assert not any("_call_impl" in vars(m) for m in model.modules())
    assert_patches_undone(model, before)


class HooksAroundEachCall(nn.Module):
    """Writes a hook into its child's hook dict and the global hook dict around each call, and removes them after
    (as adapters enabled for one call do), and sets a child's forward with object.__setattr__."""

    def __init__(self):
        super().__init__()
        self.fc, self.tap, self.head = nn.Linear(8, 8), nn.Identity(), nn.Linear(8, 4)

    def forward(self, x):
        hooks = nn.modules.module._global_forward_pre_hooks
        self.fc._forward_pre_hooks[10_003] = silu_input
        hooks[10_004] = lambda module, args: (F.softsign(args[0]),) if module is self.head else None
        plain = self.tap.forward
        object.__setattr__(self.tap, "forward", lambda y: plain(F.hardtanh(y)))
        try:
            return self.head(self.tap(self.fc(x)))
        finally:
            del self.fc._forward_pre_hooks[10_003], hooks[10_004]
            del self.tap.forward


def test_hooks_written_and_removed_around_each_call_run_in_the_scope_of_their_module():
    model = HooksAroundEachCall().eval()
    before = snapshot_patch_targets(model)
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 8),), {})], warmup_iterations=0)
    assert modules_of(frame, "silu") == {"fc"}, "a pre-hook written into the module's dict is the module's"
    assert modules_of(frame, "softsign") == {"head"}, "a global pre-hook written into its dict is its module's"
    assert modules_of(frame, "hardtanh") == {"tap"}, "a forward set by object.__setattr__ is its module's"
    assert not nn.modules.module._global_forward_pre_hooks
    assert_patches_undone(model, before)


class HooksCompiledChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.compile(nn.Sequential(nn.Linear(8, 8)), backend="eager")
        self.block.register_forward_pre_hook(lambda module, args: (F.softsign(args[0]),))
        self.block.register_forward_hook(lambda module, args, out: F.hardtanh(out))
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(F.relu(self.block(x)))


def test_hooks_of_a_compiled_child_run_in_its_scope():
    """Hooks registered on a ``torch.compile``'d child (the OptimizedModule a parent holds) run around its compiled
    forward, in torch's ``_call_impl``: they were the parent's (hardtanh in ""), as no compiled entry got the scoped
    ``_call_impl`` every other module gets."""
    model = HooksCompiledChild().eval()
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 8),), {})])
    assert modules_of(frame, "softsign") == {"block"} and modules_of(frame, "hardtanh") == {"block"}
    assert modules_of(frame, "relu") == {""} and sum(calls for calls, _ in data["hardtanh"]) == 1
