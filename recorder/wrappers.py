"""The wrappers of the patched functions, made once per process and put in place by every recording.

A wrapper is made for one exact function object and kept in the patch plan (``patch_plan``): every attribute a
recording patches, with its wrapper. The plan is made again when an attribute it was made from is no longer the
object it was (a function rebound by the user or another library between recordings gets a wrapper of its own; the
old wrapper is dropped, never put in place). Making the ~1400 wrappers and reading the ~4000 attributes they are
chosen from cost each recording more than putting them in place.

A wrapper reads the recording it scopes for (``Recording``, the one in ``recording_of``) at its first call in that
recording, off its per-call path: the sample book of its name. When the recording ends, every wrapper it called
forgets it (``Recording.forget``), so that no wrapper holds a book, and so a sample, past its recording; a wrapper
called outside any recording (a reference kept past one) calls its function unscoped.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from threading import get_ident
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812

from .calls import (
    AUTOGRAD_APPLY,
    INSIDE_CALL,
    OTHER_THREAD,
    TRITON_LAUNCH,
    attributes_state,
    attributes_unchanged,
    bound_by_a_library,
    on_other_thread,
    torch_call_targets,
    watched_owners,
)
from .compiled import dynamo_tracing
from .identity_handlers import dispatched, handler_sites, read_unhandled
from .recordings import current, in_recording
from .scope_gate import NO_SCOPE
from .scope_gate import OPEN as scopes_open
from .wrapper_maps import by_pickled_original, by_place, by_wrapper
from .wrapping import wraps

_Scope = torch._C._profiler._RecordFunctionFast
_PATCHABLE_MODULES = {F.__name__, "torch", "torch._C._nn"}
_C_FUNCTIONS = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)
# A TorchFunctionMode on (``with torch.device(...)`` too), or an argument overriding __torch_function__; the wrappers
# ask it of the positional arguments and of the keyword ones (``attn_mask=causal_lower_right(...)``), inline: on the
# per-call path a function call costs about as much as the test
_has_torch_function = torch._C._has_torch_function


def _handled_in_scope(
    function: Any, wrapper: Any, args: tuple, kwargs: dict, calling_back: set[int], scope: str, state: Any
) -> Any:
    """``function``'s call that a ``__torch_function__`` handles (``identity_handlers.dispatched``), in its
    ``scope``, with the call state ``state`` (INSIDE_CALL) while it runs."""
    token = INSIDE_CALL.set(state)
    try:
        with _Scope(scope) if scopes_open[0] else NO_SCOPE:
            return dispatched(function, wrapper, args, kwargs, calling_back)
    finally:
        INSIDE_CALL.reset(token)


def functional_names() -> list[str]:
    """Public functions of ``torch.nn.functional`` that get a scope (aitune's rule, so names match), and any that a
    library bound there in place of torch's (``F.scaled_dot_product_attention = sageattn``), not torch's helpers."""
    names = []
    for name, value in vars(F).items():
        torchs = (inspect.isfunction(value) or inspect.isbuiltin(value)) and value.__module__ in _PATCHABLE_MODULES
        if not name.startswith("_") and (torchs or bound_by_a_library(value)):
            names.append(name)
    return names


def _functional(function: Any, name: str):
    """A functional's wrapper with ``calls="functional"``: always scoped, since functionals nest and the innermost
    owns kernels (with ``calls="all"`` a functional is a ``_marked_call``: torch-level calls are scoped too, so
    it must mark itself open for them)."""
    record = labels = None  # made at the first call: most of the ~1400 patched functions are never called
    inside_call, enter_call, leave_call = INSIDE_CALL.get, INSIDE_CALL.set, INSIDE_CALL.reset
    # threads whose call of it a __torch_function__ handles (identity_handlers.dispatched)
    calling_back: set[int] = set()

    def forget() -> None:  # the end of the recording
        nonlocal record, labels
        record = labels = None

    def call_in_scope(*args, **kwargs):
        nonlocal record, labels
        if dynamo_tracing() or calling_back and get_ident() in calling_back:
            return function(*args, **kwargs)
        folded = inside_call()  # "@<module>" in a folded module's forward, before its call (else False)
        if folded is OTHER_THREAD:  # not the model's pass (recorder/threads.py), or a context made before it
            if on_other_thread():
                return function(*args, **kwargs)
            folded = False
        if record is None:
            if not current:  # a wrapper kept past its recording
                return function(*args, **kwargs)
            record, labels = in_recording(name, forget)
        handled = _has_torch_function(args) or kwargs and _has_torch_function(tuple(kwargs.values()))
        scope = labels[read_unhandled(record, args, kwargs) if handled else record(args, kwargs)]
        if handled:
            if folded:  # its functionals are its own, as below
                return _handled_in_scope(function, call_in_scope, args, kwargs, calling_back, scope + folded, False)
            with _Scope(scope) if scopes_open[0] else NO_SCOPE:  # the call state as it is: nothing to set
                return dispatched(function, call_in_scope, args, kwargs, calling_back)
        if not folded:
            with _Scope(scope) if scopes_open[0] else NO_SCOPE:
                return function(*args, **kwargs)
        token = enter_call(False)  # the functionals this call makes are its own, not the module's calls
        try:
            with _Scope(scope + folded) if scopes_open[0] else NO_SCOPE:
                return function(*args, **kwargs)
        finally:
            leave_call(token)

    return wraps(call_in_scope, function, name)


def _marked_call(function: Any, name: str, outermost_only: bool, holds_its_calls: bool | None = None):
    """A scoped call that marks itself open (INSIDE_CALL) for the torch-level calls it makes; with
    ``outermost_only`` (a torch-level call) it is left unscoped inside another open call (inside a functional,
    ``torch.bmm`` or ``x.view`` are that functional's business).

    A function written in C (``Tensor.mul_``, ``torch.addmm``, ``F.linear``) makes no call the patches see (short
    of a tensor subclass's ``__torch_function__``, whose calls then get scopes of their own), so its wrapper does
    not mark itself open: the ContextVar's set and reset are a noticeable share of what a scoped call costs under
    the profiler (benchmarks/RESULTS.md, "A C function's wrapper marking itself open"). Where a ``__torch_function__``
    handles the call (a TorchFunctionMode, ``with torch.device(...)`` too, or a tensor subclass among its arguments)
    it does: the handler calls the public function the C one stands for, looked up on torch (``x + y`` calls the
    patched ``Tensor.add``), which is this call's business, not a second one; a call of this same function back is
    let through (``identity_handlers.dispatched``).

    The call's sample recorder is made at its first call (``book.recorder`` returns the same one to every
    wrapper of a name): making one for each of the patched functions up front costs every recording time for
    functions it never calls, and slowed the recorded pass itself (benchmarks/RESULTS.md, Dead ends).

    ``holds_its_calls=False``: a call that never marks itself open, so that the torch-level calls it makes have
    scopes of their own (an autograd Function's ``apply``).
    """
    record = labels = None
    inside_call, enter_call, leave_call = INSIDE_CALL.get, INSIDE_CALL.set, INSIDE_CALL.reset
    written_in_c = isinstance(function, _C_FUNCTIONS) if holds_its_calls is None else not holds_its_calls
    checks_handlers = holds_its_calls is not False
    # threads whose call of it a __torch_function__ handles (identity_handlers.dispatched)
    calling_back: set[int] = set()

    def forget() -> None:  # the end of the recording
        nonlocal record, labels
        record = labels = None

    def call_in_scope(*args, **kwargs):
        nonlocal record, labels
        if dynamo_tracing() or calling_back and get_ident() in calling_back:
            return function(*args, **kwargs)
        state = inside_call()
        if state is True and outermost_only or state is OTHER_THREAD and on_other_thread():  # recorder/threads.py
            return function(*args, **kwargs)
        if record is None:
            if not current:  # a wrapper kept past its recording
                return function(*args, **kwargs)
            record, labels = in_recording(name, forget)
        handled = checks_handlers and (
            _has_torch_function(args) or kwargs and _has_torch_function(tuple(kwargs.values()))
        )
        scope = labels[read_unhandled(record, args, kwargs) if handled else record(args, kwargs)]
        if state.__class__ is str:  # a folded module's call: its scope is the module's too
            scope += state
        if handled:
            return _handled_in_scope(function, call_in_scope, args, kwargs, calling_back, scope, True)
        if written_in_c:
            with _Scope(scope) if scopes_open[0] else NO_SCOPE:
                return function(*args, **kwargs)
        token = enter_call(True)
        try:
            with _Scope(scope) if scopes_open[0] else NO_SCOPE:
                return function(*args, **kwargs)
        finally:
            leave_call(token)

    return wraps(call_in_scope, function, name)


def _calls_by_name(function: Any, holds_its_calls: bool | None = None) -> Callable[[str], Any]:
    """``name -> wrapper``: one torch-level call wrapper (outermost only) of ``function`` per name, made at its
    first call and kept for the process like every wrapper, for the targets whose calls take their name from what
    they run (a Triton kernel, an autograd Function)."""
    by_name: dict[str, Any] = {}

    def call_named(name: str) -> Any:
        call = by_name.get(name)
        if call is None:
            call = by_name.setdefault(name, _marked_call(function, name, True, holds_its_calls))
        return call

    return call_named


def triton_kernel_name(kernel: Any) -> str:
    """``triton.<name>`` of a ``@triton.jit`` function: its Python function's name."""
    function = getattr(kernel, "fn", None)
    return f"{TRITON_LAUNCH}.{getattr(function, '__name__', None) or getattr(kernel, '__name__', 'kernel')}"


class _GridFunction:
    """A launch's grid given as a function (``lambda meta: (cdiv(n, meta["BLOCK"]),)``), as its sample holds
    it: equal to another of the same code, since programs make a new one per launch, and a new object in every
    pass would make every launch a sample of its own and the warm-up's prediction of the recorded pass wrong."""

    __slots__ = ("function",)

    def __init__(self, function: Any) -> None:
        self.function = function

    def _code(self) -> Any:
        return getattr(self.function, "__code__", self.function)

    def __eq__(self, other: object) -> bool:
        return type(other) is _GridFunction and self._code() == other._code()

    def __hash__(self) -> int:
        return hash(self._code())

    def __repr__(self) -> str:
        return f"<grid function {getattr(self.function, '__qualname__', type(self.function).__qualname__)}>"


def _triton_launch(run: Any):
    """The wrapper of ``JITFunction.run``: a torch-level call (outermost only) named after the kernel it
    launches, ``triton.<name>``, with one call wrapper per name (made at its first launch, kept for the process
    like every wrapper). The kernel is the call's first argument, so samples.json names it too."""

    def launch(kernel, *args, **kwargs):
        grid = kwargs.get("grid")
        if type(grid) is _GridFunction:
            kwargs["grid"] = grid.function
        return run(kernel, *args, **kwargs)

    call_named = _calls_by_name(launch)

    def launch_in_scope(kernel, *args, **kwargs):
        if not current or dynamo_tracing():
            return run(kernel, *args, **kwargs)
        grid = kwargs.get("grid")
        if callable(grid):
            kwargs["grid"] = _GridFunction(grid)
        return call_named(triton_kernel_name(kernel))(kernel, *args, **kwargs)

    return wraps(launch_in_scope, run, TRITON_LAUNCH)


def _autograd_apply(apply: classmethod) -> classmethod:
    """The wrapper of ``torch.autograd.Function.apply`` (a classmethod): a call named ``<Function>.apply`` that
    holds none of the calls it makes, outside any other call, for the Functions not of torch's own (torch's are
    its internals: checkpointing, collectives, a compiled region's ``CompiledFunction``). One call wrapper per name,
    kept for the process; the Function's class is the call's first argument."""
    original = apply.__func__
    call_named = _calls_by_name(original, holds_its_calls=False)

    def apply_in_scope(cls, *args, **kwargs):
        if not current or INSIDE_CALL.get() is True or dynamo_tracing() or cls.__module__.startswith("torch."):
            return original(cls, *args, **kwargs)
        return call_named(f"{cls.__name__}.{AUTOGRAD_APPLY}")(cls, *args, **kwargs)

    return classmethod(wraps(apply_in_scope, original, AUTOGRAD_APPLY))


_FUNCTIONAL, _MARKED_FUNCTIONAL, _TORCH_CALL = "functional", "marked functional", "torch call"
_TRITON, _AUTOGRAD = "triton launch", "autograd apply"


def _make(kind: str, function: Any, name: str) -> Any:
    if kind == _FUNCTIONAL:
        return _functional(function, name)
    if kind == _TRITON:
        return _triton_launch(function)
    if kind == _AUTOGRAD:
        return _autograd_apply(function)
    return _marked_call(function, name, outermost_only=kind == _TORCH_CALL)


def _place(owner: Any, attribute: str) -> tuple[str, str]:
    """(module, qualified name) under which pickle finds ``owner.attribute``."""
    if isinstance(owner, types.ModuleType):
        return owner.__name__, attribute
    return owner.__module__, f"{owner.__qualname__}.{attribute}"


def _named_after_its_place(wrapper: Any, owner: Any, attribute: str) -> Any:
    """``wrapper`` named as the attribute it is first patched in (``torch.nn.functional.relu``), so that a module
    holding it can be pickled while recorded (recorder/copies.py): pickle writes a function as its module and
    qualified name, and checks that they hold it (while recorded they hold the wrapper), and that name loads as the
    function itself."""
    if isinstance(wrapper, types.FunctionType) and isinstance(owner, (types.ModuleType, type)):
        wrapper.__module__, wrapper.__qualname__ = _place(owner, attribute)
    return wrapper


_KINDS = {TRITON_LAUNCH: _TRITON, AUTOGRAD_APPLY: _AUTOGRAD}  # the targets whose name is their kind's


class PatchPlan:
    """Every attribute one recording patches, by owner: ``(owner, {attribute: wrapper})``, F's first; ``originals``
    and ``wrappers`` map ``id(original)`` to the original and its wrapper (stored references to the originals); the
    maps made from them once with the plan (recorder/wrapper_maps.py): ``by_wrapper`` (places left holding one),
    ``by_place`` (fx's names, recorder/graph_code.py) and ``pickled_as_wrappers`` (recorder/copies.py)."""

    def __init__(self, calls: str, made_before: dict) -> None:
        self.state = attributes_state(_read_owners())  # read before any choice, which it then vouches for
        self.made: dict[tuple[str, str, int], tuple[Any, Any]] = {}  # (kind, name, id(original)) -> both
        self.originals: dict[int, Any] = {}
        self.wrappers: dict[int, Any] = {}
        self.groups: list[tuple[Any, dict[str, Any]]] = []
        owners: dict[int, dict[str, Any]] = {}
        places: set[tuple[str, str]] = set()  # (module, qualified name) of every patched attribute, as pickle names it
        functional_kind = _MARKED_FUNCTIONAL if calls == "all" else _FUNCTIONAL
        targets = [(F, name, name) for name in functional_names()]
        if calls == "all":
            targets += torch_call_targets()
        for owner, attribute, name in targets:
            # Function.apply is patched as the classmethod it is (getattr would give a new bound method each time)
            function = vars(owner)[attribute] if name == AUTOGRAD_APPLY else getattr(owner, attribute)
            wrapper = self.wrappers.get(id(function))  # torch.conv2d is F.conv2d: keep the functional's name
            if wrapper is None:
                kind = _KINDS.get(name) or (functional_kind if owner is F else _TORCH_CALL)
                key = (kind, name, id(function))
                before = made_before.get(key)
                if before is not None and before[0] is function:
                    wrapper = before[1]
                else:
                    wrapper = _named_after_its_place(_make(kind, function, name), owner, attribute)
                self.made[key] = (function, wrapper)
                self.wrappers[id(function)], self.originals[id(function)] = wrapper, function
            group = owners.get(id(owner))
            if group is None:
                group = owners[id(owner)] = {}
                self.groups.append((owner, group))
            group[attribute] = wrapper
            places.add(_place(owner, attribute))
        handler_sites(self.groups, self.originals, self.wrappers)  # the wrappers are the process's, so are they
        self.by_wrapper = by_wrapper(self.originals, self.wrappers)
        self.by_place = by_place(self.groups)
        self.pickled_as_wrappers = by_pickled_original(self.originals, self.wrappers, places)

    def current(self) -> bool:
        """Whether every attribute the plan was made from is still the object it was."""
        return attributes_unchanged(self.state, _read_owners())


def _read_owners() -> list[Any]:
    return [F, *watched_owners()]


_plans: dict[str, PatchPlan] = {}


def patch_plan(calls: str, recording: bool = False) -> PatchPlan:
    """The plan of a recording with ``calls`` (``"all"`` or ``"functional"``), made again where it is not current;
    while a ``recording`` runs, the one made before it, of the originals (its patches make no plan current)."""
    plan = _plans.get(calls)
    if plan is None or not (recording or plan.current()):
        plan = _plans[calls] = PatchPlan(calls, {} if plan is None else plan.made)
    return plan
