"""A recorded module's forward reached through its class (``type(child).forward(child, x)``,
``nn.Linear.forward(self.lin, x)``, ``Base.forward(self.child, x)`` on a subclass's instance): its calls are the
module's, in one scope, and ``super().forward(x)`` inside a subclass's forward opens none of its own
(recorder/class_forwards.py)."""

import functools
import gzip
import inspect
import json

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from conftest import assert_patches_undone, snapshot_patch_targets  # noqa: E402
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from reference import assert_matches_reference  # noqa: E402
from torch import nn  # noqa: E402


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return F.gelu(self.fc(x))


class LoudBlock(Block):
    def forward(self, x):
        return F.softsign(super().forward(x))  # through the class, on its own scope: no second one


class Scaled(nn.Linear):
    def forward(self, x):
        return F.hardswish(super().forward(x))


class CallsThroughClasses(nn.Module):
    def __init__(self):
        super().__init__()
        self.child, self.loud, self.lin, self.scaled = Block(), LoudBlock(), nn.Linear(8, 8), Scaled(8, 8)

    def forward(self, x):
        x = type(self.child).forward(self.child, x)
        x = Block.forward(self.loud, x)  # the base's function on a subclass's instance: the base's code runs
        x = nn.Linear.forward(self.lin, x)  # a module folded into its one call
        x = self.scaled(x)
        return F.relu(self.loud(x))


def _module_scopes(run_dir) -> list[str]:
    with gzip.open(run_dir / "trace.json.gz") as trace:
        events = json.load(trace)["traceEvents"]
    return sorted(e["name"] for e in events if e.get("name", "").startswith("ks.module:"))


def test_forwards_reached_through_their_classes_are_their_modules(tmp_path):
    model, x = CallsThroughClasses().eval(), torch.randn(2, 8)
    with torch.no_grad():
        expected = model(x)
    before, original = snapshot_patch_targets(model), {kind: vars(kind)["forward"] for kind in (Block, LoudBlock)}
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((x,), {})], out=tmp_path / "run")
    calls = frame.dropna(subset=["function_name"]).groupby("function_name")["module_name"].agg(set)
    assert calls["gelu"] == {"child", "loud"}, "the class's forward runs in the instance's scope"
    assert calls["softsign"] == {"loud"} and calls["hardswish"] == {"scaled"} and calls["relu"] == {""}
    assert calls["linear"] == {"child.fc", "loud.fc", "lin", "scaled"}, "a folded module names its call"
    assert [count for count, _ in data["softsign"]] == [1], "Block.forward on LoudBlock ran Block's code"
    scopes = ["ks.module:", "ks.module:child", "ks.module:loud", "ks.module:loud", "ks.module:scaled"]
    assert _module_scopes(tmp_path / "run") == scopes, "one scope per forward, super().forward opens none"
    with load_run(tmp_path / "run") as run:
        assert_matches_reference(run, tmp_path / "run" / "trace.json.gz")
    assert_patches_undone(model, before)
    assert all(vars(kind)["forward"] is function for kind, function in original.items()), "the classes put back"
    assert not hasattr(vars(nn.Linear)["forward"], "__wrapped__")
    with torch.no_grad():
        assert torch.equal(model(x), expected)


class Failing(nn.Module):
    def forward(self, x):
        raise KeyError("no forward today")


class CallsAFailingClass(nn.Module):
    def __init__(self):
        super().__init__()
        self.child, self.calls = Failing(), 0

    def forward(self, x):
        self.calls += 1
        if self.calls < 2:
            return F.relu(x)
        return Failing.forward(self.child, x)


def test_the_classes_are_put_back_when_a_forward_through_its_class_raises():
    model, original = CallsAFailingClass(), vars(Failing)["forward"]
    with pytest.raises(KeyError, match="no forward today"):
        ModuleFunctionKernelProfiler().profile(model, [((torch.ones(2),), {})], warmup_iterations=1)
    assert model.calls == 2, "it raised in the recorded pass, through the class-level wrapper"
    assert vars(Failing)["forward"] is original and "forward" not in vars(model.child)


class _RefusesForward(type(nn.Module)):
    """A metaclass that freezes its classes' forward once set up (as some frameworks' registries do)."""

    def __setattr__(cls, key, value):
        if key == "forward" and vars(cls).get("frozen", False):
            raise AttributeError(f"{cls.__name__}.forward is frozen")
        super().__setattr__(key, value)


class Frozen(nn.Module, metaclass=_RefusesForward):
    frozen = True

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return F.gelu(self.fc(x))


class CallsAFrozenClass(nn.Module):
    def __init__(self):
        super().__init__()
        self.child, self.block = Frozen(), Block()

    def forward(self, x):
        return Block.forward(self.block, self.child(x)) + Frozen.forward(self.child, x)


def test_a_class_that_refuses_a_new_forward_is_scoped_without_one():
    """A class whose metaclass refuses a new ``forward`` keeps its own (it was left unscoped, its call through the
    class the caller's): no class attribute is set, its function's code is swapped."""
    model, x = CallsAFrozenClass().eval(), torch.randn(2, 8)
    original, code = vars(Frozen)["forward"], vars(Frozen)["forward"].__code__
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((x,), {})])
    gelus = frame[frame["function_name"] == "gelu"].groupby("module_name").size().to_dict()
    assert gelus == {"child": 2, "block": 1}
    assert vars(Frozen)["forward"] is original and original.__code__ is code, "put back"


class PropertyForward(nn.Module):
    """A forward that is a property returning the callable to run (it wins over any instance attribute), which
    only its parent's forward can read."""

    def __init__(self):
        super().__init__()
        self.fc, self.bound = nn.Linear(8, 8), False

    @property
    def forward(self):
        if not self.bound:
            raise RuntimeError("read outside the parent's forward")
        return lambda x: F.hardsigmoid(self.fc(x))


class Fast(nn.Module):
    def forward(self, x):
        return F.silu(self.fc(x))


class SwapsItsClass(Block):
    """Becomes a Fast at its second call, as libraries that swap in an implementation at a first call do."""

    def __init__(self):
        super().__init__()
        self.calls = [0]  # counted in place: the module's attributes stay the objects they were

    def forward(self, x):
        self.calls[0] += 1
        if self.calls[0] == 2:
            self.__class__ = Fast
        return F.gelu(self.fc(x))


class HoldsOddForwards(nn.Module):
    def __init__(self):
        super().__init__()
        self.prop, self.swaps = PropertyForward(), SwapsItsClass()

    def forward(self, x):
        self.prop.bound = True
        try:
            return F.relu(self.swaps(self.prop(x)))
        finally:
            self.prop.bound = False


def test_a_property_forward_and_a_class_changed_midway_run_as_unrecorded_in_their_scopes():
    torch.manual_seed(0)
    model, reference, x = HoldsOddForwards().eval(), HoldsOddForwards().eval(), torch.randn(2, 8)
    reference.load_state_dict(model.state_dict())
    with torch.no_grad():
        expected = [reference(x) for _ in range(4)][-1]  # the 4th call, as profile()'s recorded pass (3 warm-ups)
    before, prop = snapshot_patch_targets(model), vars(PropertyForward)["forward"]
    outputs = []
    frame, data = ModuleFunctionKernelProfiler().profile(
        lambda x: outputs.append(model(x)) or outputs[-1], [((x,), {})], module=model, warmup_iterations=3
    )
    assert type(model.swaps) is Fast and torch.equal(outputs[-1], expected), "the new class's forward ran"
    calls = frame.dropna(subset=["function_name"]).groupby("function_name")["module_name"].agg(set)
    assert calls["hardsigmoid"] == {"prop"}, "the property's callable runs in its module's scope"
    assert calls["silu"] == {"swaps"} and "gelu" not in data, "the new class's forward, in the module's scope"
    assert vars(PropertyForward)["forward"] is prop and isinstance(PropertyForward.forward, property)
    model.swaps.__class__ = SwapsItsClass  # the snapshot was of that class's module
    assert_patches_undone(model, before)


def _outermost_only(forward):
    """A class forward that acts only where it is still the class's forward, as transformers' checkpointing layers
    tell it (``type(self).forward is forward_with_checkpointing``): a class-level wrapper in its place turns it off."""

    @functools.wraps(forward)
    def outermost(self, x):
        if type(self).forward is outermost:
            return F.softsign(forward(self, x))
        return forward(self, x)

    return outermost


class TellsItsForward(Block):
    forward = _outermost_only(Block.forward)


class CallsItsLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer, self.block = TellsItsForward(), Block()

    def forward(self, x):
        return Block.forward(self.block, self.layer(x))


def test_a_class_forward_that_checks_it_is_the_classes_keeps_its_identity_and_the_others_their_wrappers():
    model, x = CallsItsLayers().eval(), torch.randn(2, 8)
    with torch.no_grad():
        expected = model(x)
    outputs = []
    frame, data = ModuleFunctionKernelProfiler().profile(
        lambda x: outputs.append(model(x)) or outputs[-1], [((x,), {})], module=model
    )
    assert torch.equal(outputs[-1], expected), "the layer's forward saw itself as the class's, as unrecorded"
    assert [count for count, _ in data["softsign"]] == [1]
    calls = frame.dropna(subset=["function_name"]).groupby("function_name")["module_name"].agg(set)
    assert calls["softsign"] == {"layer"} and calls["gelu"] == {"layer", "block"}, "Block's class call is scoped"


_BLOCK_FORWARD = Block.forward  # held at import, as a library keeps the forward it may have replaced


def _identities(module: nn.Module) -> dict:
    return {
        "bound's function": module.forward.__func__ is Block.forward,
        "class's": type(module).forward is _BLOCK_FORWARD,
        "equal bound": module.forward == _BLOCK_FORWARD.__get__(module),
        "static": inspect.getattr_static(module, "forward") is _BLOCK_FORWARD,
        "not wrapped": not hasattr(Block.forward, "__wrapped__") and inspect.unwrap(Block.forward) is _BLOCK_FORWARD,
        "not set on it": "forward" not in vars(module),
        "named": (Block.forward.__qualname__, Block.forward.__code__.co_name) == ("Block.forward", "forward"),
        "signature": str(inspect.signature(module.forward)) == "(x)",
    }


class ChecksItsChild(nn.Module):
    """Takes a branch of its own wherever its child's forward is not what it was at import."""

    def __init__(self):
        super().__init__()
        self.child, self.seen = Block(), []

    def forward(self, x):
        self.seen.append(_identities(self.child))
        x = self.child(x)
        return x if all(self.seen[-1].values()) else F.softsign(x)


def test_a_forward_is_the_same_object_while_recorded_and_its_module_still_scoped():
    """A model that asks whether its child's forward is still its class's (by identity, equality, ``getattr_static``,
    ``__wrapped__``, its instance dict) took another branch while recorded: an instance ``forward`` and a class-level
    wrapper stood in for the function."""
    model, x = ChecksItsChild().eval(), torch.randn(2, 8)
    with torch.no_grad():
        expected = model(x)
    unrecorded = model.seen[-1]
    assert all(unrecorded.values())
    outputs = []
    frame, data = ModuleFunctionKernelProfiler().profile(
        lambda x: outputs.append(model(x)) or outputs[-1], [((x,), {})], module=model
    )
    assert model.seen[-1] == unrecorded
    assert torch.equal(outputs[-1], expected) and "softsign" not in data
    calls = frame.dropna(subset=["function_name"]).groupby("function_name")["module_name"].agg(set)
    assert calls["gelu"] == {"child"} and calls["linear"] == {"child.fc"}


class CallsItsLayerThroughItsClass(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer, self.head = TellsItsForward(), nn.Linear(8, 8)

    def forward(self, x):
        return self.head(TellsItsForward.forward(self.layer, x) + self.layer.forward(x))


def test_a_forward_that_checks_it_is_the_classes_called_through_its_class_is_its_modules():
    """A layer whose forward holds itself (transformers' checkpointing layers), called through its class or its
    bound ``forward``: its calls were the caller's (its class kept the function, so the call reached no scope)."""
    model, x = CallsItsLayerThroughItsClass().eval(), torch.randn(2, 8)
    with torch.no_grad():
        expected = model(x)
    outputs = []
    frame, data = ModuleFunctionKernelProfiler().profile(
        lambda x: outputs.append(model(x)) or outputs[-1], [((x,), {})], module=model
    )
    assert torch.equal(outputs[-1], expected)
    calls = frame.dropna(subset=["function_name"]).groupby("function_name")["module_name"].agg(set)
    assert calls["softsign"] == {"layer"} and calls["gelu"] == {"layer"}
    assert [count for count, _ in data["softsign"]] == [2]


class CompiledOnce(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return F.gelu(self.fc(x))


class CallsACompiledClass(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = CompiledOnce()

    def forward(self, x):
        return CompiledOnce.forward(self.child, x)


def test_a_class_whose_forward_dynamo_compiled_is_scoped_through_its_class():
    """A class whose forward's code holds compiled entries (another instance compiled earlier in the process) keeps
    its code, whose entries a compiled model would run: its call through the class was the caller's; a wrapper in
    the class's place scopes it, and the class gets its function back."""
    torch._dynamo.reset()
    torch.compile(CompiledOnce().eval(), backend="eager")(torch.randn(2, 8))
    model, x = CallsACompiledClass().eval(), torch.randn(2, 8)
    original = vars(CompiledOnce)["forward"]
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((x,), {})])
    calls = frame.dropna(subset=["function_name"]).groupby("function_name")["module_name"].agg(set)
    assert calls["gelu"] == {"child"}
    assert vars(CompiledOnce)["forward"] is original and original.__code__.co_name == "forward"
    torch._dynamo.reset()


class SharesCompiledForward(nn.Module):
    forward = CompiledOnce.forward  # another class's function, shared

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)


class CallsBothThroughClasses(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = CompiledOnce(), SharesCompiledForward()

    def forward(self, x):
        return CompiledOnce.forward(self.a, x) + SharesCompiledForward.forward(self.b, x)


def test_two_classes_sharing_a_compiled_forward_are_each_scoped_through_their_class():
    """A forward whose code keeps compiled entries, shared by two classes: each class gets its wrapper (the second
    was skipped as already seen, and its class call counted under the caller)."""
    torch._dynamo.reset()
    torch.compile(CompiledOnce().eval(), backend="eager")(torch.randn(2, 8))
    model, x = CallsBothThroughClasses().eval(), torch.randn(2, 8)
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((x,), {})])
    calls = frame.dropna(subset=["function_name"]).groupby("function_name")["module_name"].agg(set)
    assert calls["gelu"] == {"a", "b"}
    assert vars(SharesCompiledForward)["forward"] is vars(CompiledOnce)["forward"], "put back"
    torch._dynamo.reset()


def test_a_forward_that_checks_it_is_the_classes_with_compiled_code_keeps_its_place():
    """A self-checking forward whose code holds compiled entries (transformers' ``forward_with_checkpointing`` is one
    code for every layer class, compiled with any of them): a wrapper in its class's place turned it off (gradient
    checkpointing recomputed nothing in a training step, seen in the full CPU sweep); it keeps its place."""
    torch._dynamo.reset()
    torch.compile(TellsItsForward().eval(), backend="eager")(torch.randn(2, 8))
    model, x = CallsItsLayers().eval(), torch.randn(2, 8)
    with torch.no_grad():
        expected = model(x)
    outputs = []
    _, data = ModuleFunctionKernelProfiler().profile(
        lambda x: outputs.append(model(x)) or outputs[-1], [((x,), {})], module=model
    )
    assert torch.equal(outputs[-1], expected) and [count for count, _ in data["softsign"]] == [1]
    torch._dynamo.reset()


def test_a_forwards_swapped_code_is_made_once_and_not_kept_past_its_function():
    """forward_codes keeps each function's swapped code for the next recording, but not the function itself: a class
    made and dropped (a process profiling many models) must be collected."""
    import gc
    import weakref

    from kernelscope.recorder.forward_codes import swapped_code

    def made_class():
        class Block(nn.Module):
            def forward(self, x, *, scale=2):
                return x * scale

        return Block

    block = made_class()
    first = swapped_code(block.forward)
    assert first is not None and swapped_code(block.forward) is first  # made once, then read back
    function = weakref.ref(block.forward)
    del block, first
    gc.collect()
    assert function() is None, "the swapped codes' cache keeps a dropped class's forward alive"
