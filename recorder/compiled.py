"""torch.compile'd code under the recorder: it must run what it compiled without the recorder.

- A compiled module's call gets the scope of the call ``torch.compile`` (``compiled_forward``); the modules inside it
  are not patched (instrument.py). Compiled modules are found however they were compiled (``compiled_entry``).
- While patched, compiled code runs the entries compiled before the patches (``compiled_code_kept``); a frame that
  has none is refused by torch, and profile() then compiles it unpatched or records with module scopes only
  (``record_keeping_compiled_code``).
- Every wrapper steps aside while dynamo traces it (``dynamo_tracing``), so what dynamo compiles while they are in
  place (under a stance of the user's that compiles, or with module scopes only) is the model's own code.
- What torch.profiler imports at its first start is imported before the patches
  (``import_what_the_profiler_imports``).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import torch

from .calls import INSIDE_CALL, OTHER_THREAD, on_other_thread
from .given_up_frames import given_up_codes, run_eagerly, warn_given_up
from .scope_gate import NO_SCOPE
from .scope_gate import OPEN as scopes_open
from .stance_refusals import refused_under_stance
from .wrapping import wraps

_Scope = torch._C._profiler._RecordFunctionFast
# A wrapper's first test: tracing its ContextVar and sample bookkeeping broke dynamo's graphs and mis-traced the
# ContextVar (a reduce-overhead block crashed on the H200). A plain Python function: about 25 ns a call.
dynamo_tracing = torch.compiler.is_dynamo_compiling
T = TypeVar("T")
# The module scope of the compiled module whose call runs now, under which its graphs' modules are, and its frames' self
COMPILED_MODULE_SCOPE: contextvars.ContextVar[tuple | None] = contextvars.ContextVar("ks_compiled_module", default=None)


def optimized_module_type():
    """The class of torch.compile'd modules, or None where dynamo is not loaded."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")  # not imported: nothing was compiled
    return getattr(eval_frame, "OptimizedModule", None)


def is_compiled_callable(value: Any) -> bool:
    """Whether ``value`` is what ``torch.compile(function)`` returns (dynamo's wrapper of the function)."""
    if not callable(value):
        return False
    try:
        return hasattr(value, "_torchdynamo_orig_callable")
    except Exception:  # noqa: BLE001 (a __getattr__ of the program's own that raises other than AttributeError)
        return False


def compiled_entry(module: torch.nn.Module, optimized_type: Any) -> tuple[str, Any] | None:
    """``(attribute, compiled callable)`` through which a torch.compile'd module runs its compiled code, or None for
    a module that is not compiled itself: ``torch.compile(module)`` (the OptimizedModule's ``forward``),
    ``module.compile()`` (the instance's ``_compiled_call_impl``, which ``nn.Module.__call__`` calls in place of
    ``_call_impl``), and ``module.forward = torch.compile(module.forward)``. The modules it calls are traced into its
    graphs: patched, they would fail its guards."""
    if optimized_type is not None and isinstance(module, optimized_type):
        return "forward", module.forward
    own = vars(module)
    if own.get("_compiled_call_impl") is not None:
        return "_compiled_call_impl", own["_compiled_call_impl"]
    if is_compiled_callable(own.get("forward")):
        return "forward", own["forward"]
    return None


def calls_of_wrappers(optimized_type: type, scoped: Callable[[Any], Callable | None]) -> Callable:
    """``OptimizedModule.__call__`` for the recording: a ``torch.compile(module)`` of an observed module that is not
    observed itself (``profile(torch.compile(model), module=model)``, or a wrapper the program holds outside the
    model) runs as ``scoped(module)`` makes of its bound call; its graphs trace the modules the recorder patches, and
    guard their ``__dict__``. Any other runs as it is."""
    call = vars(optimized_type)["__call__"]

    def call_of_wrapper(self, *args, **kwargs):
        made = None if dynamo_tracing() else scoped(vars(self).get("_modules", {}).get("_orig_mod"))
        if made is None:
            return call(self, *args, **kwargs)
        return made(types.MethodType(call, self))(*args, **kwargs)

    return wraps(call_of_wrapper, call, "__call__")


def compiled_methods(module: torch.nn.Module) -> list[tuple[str, Any]]:
    """``(attribute, compiled callable)`` for each torch.compile'd method of ``module`` that it holds beside the
    forward it runs: ``torch.compile(self.__call__)`` kept as an attribute (transformers' ``_compiled_call``, which
    ``generate()`` calls for its decoding steps while the prefill calls the module as it is). Such a module runs
    both ways, so its modules are patched; its compiled graphs guard their ``__dict__`` all the same."""
    return [
        (attribute, value)
        for attribute, value in vars(module).items()
        if attribute not in ("forward", "_compiled_call_impl")
        and is_compiled_callable(value)
        and getattr(value._torchdynamo_orig_callable, "__self__", None) is module
    ]


def compiled_forward(forward: Any, scope_name: str, call: Any, marks_its_calls: bool = True, frame: tuple = ("", None)):
    """A compiled module's forward in its module scope and the call scope ``call(args, kwargs)`` names. With
    ``marks_its_calls`` (``calls="all"``) the torch-level calls its compiled code makes (eager parts between graphs)
    are its own (INSIDE_CALL); a functional called there has a scope of its own either way. ``frame``: the
    module scope of its compiled frame's ``self`` where that is not the module (an OptimizedModule's ``_orig_mod``),
    and that ``self``."""

    def compiled_in_scope(*args, **kwargs):
        if dynamo_tracing() or INSIDE_CALL.get() is OTHER_THREAD and on_other_thread():  # recorder/threads.py
            return forward(*args, **kwargs)
        call_scope, scoped = call(args, kwargs), scopes_open[0]  # closed before the profiler starts: scope_gate.py
        with _Scope(scope_name) if scoped else NO_SCOPE, _Scope(call_scope) if scoped else NO_SCOPE:
            # the module scope its inductor kernels' modules are under (inductor_kernels.py)
            module_token = COMPILED_MODULE_SCOPE.set((frame[0] or scope_name, frame[1]))
            token = INSIDE_CALL.set(True) if marks_its_calls else None
            try:
                return forward(*args, **kwargs)
            finally:
                if token is not None:
                    INSIDE_CALL.reset(token)
                COMPILED_MODULE_SCOPE.reset(module_token)

    return wraps(compiled_in_scope, forward)


def import_what_the_profiler_imports() -> None:
    """torch.profiler's first start in a process runs ``hasattr(torch, "_inductor")`` (torch 2.11–2.13), which imports
    inductor, dynamo and sympy (seconds, paid by plain torch.profiler as well). Done before the
    patches: module code run while they are in place would keep the wrappers in its tables of torch functions (dynamo's
    constant-folded functions, for one) for the rest of the process."""
    hasattr(torch, "_inductor")


@functools.cache
def recorder_codes() -> tuple[types.CodeType, ...]:
    """The code of every function of this package, nested functions (the wrappers) included, and of the torch
    functions written in Python that its modules call by name (``dynamo_tracing``; ``may_compare_by_identity``'s
    ``_get_current_function_mode_stack``, called by every call a default device's mode handles): a wrapper called
    inside a compiled region calls them there, where torch refuses a frame dynamo has not seen."""
    package = __name__.rpartition(".")[0]
    codes: list[types.CodeType] = []
    torch_codes: list[types.CodeType] = []
    for name, module in list(sys.modules.items()):
        if name == package or name.startswith(package + "."):
            for value in vars(module).values():
                _collect_codes(value, package, codes)
                _collect_codes(value, "torch", torch_codes, classes=False)  # their comprehensions too
    folder = os.path.dirname(__file__) + os.sep  # not contextlib's helper behind a @contextmanager, say
    return (*dict.fromkeys(torch_codes), *(code for code in codes if code.co_filename.startswith(folder)))


def _collect_codes(value: Any, package: str, into: list, classes: bool = True) -> None:
    """The code of ``value`` and of the functions nested in it, where it is a function of ``package`` (or, with
    ``classes``, a class of it: its methods')."""
    if classes and isinstance(value, type) and value.__module__.startswith(package):
        for member in vars(value).values():
            for function in (getattr(member, "__func__", member), *(getattr(member, a, None) for a in _ACCESSORS)):
                _collect_codes(function, package, into)
    elif inspect.isfunction(value) and (value.__module__ or "").startswith(package):
        pending = [value.__code__]
        while pending:
            code = pending.pop()
            into.append(code)
            pending.extend(const for const in code.co_consts if isinstance(const, types.CodeType))


_ACCESSORS = ("fget", "fset", "fdel")


@contextmanager
def compiled_code_kept() -> Iterator[None]:
    """While the functions are patched, torch.compile runs the code it compiled before, unguarded.

    Compiled code guards the identity of the functions it traced (``F.linear``…): patched, they fail the guards, and
    dynamo would compile the model again inside the recorded passes, through the wrappers: graph breaks, and fake
    tensors and symbolic sizes from its own tracing counted as samples (torch's Python decompositions call the
    patched functions). ``set_stance(skip_guard_eval_unsafe=True)`` runs only the guards that tell a frame's compiled
    entries apart (tensors' shapes, and whatever failed a guard before), not those the patches fail; the user's stance
    and backend are kept (``force_eager`` runs no compiled code and is left alone).

    Under that stance torch refuses (stance_refusals.py) every frame it finds no entry for, also before dynamo
    could decide to skip it, and so two kinds of frame that ran compiled before the patches:

    - code dynamo has not seen: the recorder's own, run inside compiled regions wherever compiled code calls a patched
      function (a Tensor method at a graph break: ``.item()``, ``Tensor.__bool__`` of a data-dependent branch), and
      the torch functions written in Python it calls there (the mode stack, read under a default device). It is
      marked for dynamo to run as it is (``_mark_recorder_code``);
    - a compiled entry that tells itself apart by nothing: one guarding no tensor but parameters (a compiled function
      of an int, a resume function after a graph break that holds no tensor) has no guards to run under the stance,
      and torch counts that as a miss. Such entries run their ambient guards (grad mode, default device…) while
      recording (``_ambient_guards_for_entries_without_any``).

    Frames the model ran compiled before the patches (profile()'s unpatched warm-up passes, or the user's own calls)
    then find their entries."""
    set_stance = _unguarded_stance_setter()
    current = getattr(sys.modules.get("torch._dynamo.eval_frame"), "_stance", None)
    if set_stance is None or current is None or current.stance == "force_eager":  # None: nothing was compiled
        yield
        return
    _mark_recorder_code()
    given = _ambient_guards_for_entries_without_any()
    STANCE_KEPT[0] = True
    try:
        if current.skip_guard_eval_unsafe:
            yield
        else:
            with set_stance(current.stance, skip_guard_eval_unsafe=True, force_backend=current.backend):
                yield
    finally:
        STANCE_KEPT[0] = False
        _take_back_ambient_guards(given)


# Whether compiled_code_kept's stance is on: the wrappers then keep their books with dynamo's frame callback off.
STANCE_KEPT = [False]
_set_eval_frame = getattr(getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None), "set_eval_frame", None)


def unseen_by_dynamo(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)``, with dynamo's frame callback off while compiled_code_kept's stance is on. A wrapper called
    inside a compiled frame (a dynamic graph's float input goes through the patched ``torch.as_tensor`` before the
    graph runs) keeps its books there: at a name's or a signature's first call that runs code of ours and of torch
    that dynamo has not seen, and under the stance torch refuses every such frame instead of skipping it (the
    recording fell back to module scopes)."""
    if _set_eval_frame is None or not STANCE_KEPT[0]:
        return function(*args)
    prior = _set_eval_frame(None)
    try:
        return function(*args)
    finally:
        _set_eval_frame(prior)


def compiled_entries() -> dict[types.CodeType, list]:
    """Every frame dynamo compiled in this process (that is still alive), with its compiled entries (dynamo's
    ``_CacheEntry`` objects; a hit moves an entry to the front); empty where this torch does not keep them so."""
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    entries_of = getattr(sys.modules.get("torch._dynamo.eval_frame"), "_debug_get_cache_entry_list", None)
    if entries_of is None or not hasattr(convert_frame, "input_codes"):
        return {}
    codes = filter(None, (ref() for ref in list(convert_frame.input_codes.seen)))
    return {code: list(entries_of(code)) for code in codes}


@contextmanager
def entries_compiled_while_patched_dropped() -> Iterator[None]:
    """Drop, after the block, the compiled entries of every frame that dynamo compiled anew inside it (with module
    scopes only, the recorder's instance attributes are in the modules' ``__dict__``, and its entries guard them).

    Such entries never hit again once the patches are undone, yet count against the recompile limit of their code
    (one count for every model where the module is in ``*args``, as transformers' shared forward decorators take
    it), and the guards they failed become diff guards of entries compiled later: a later recording of another model
    sharing that code fell back too. dynamo removes entries only code by code (``reset_code``), so such a frame's
    older entries go as well, and are compiled again, as the program runs them, at its next call."""
    before = {code: {entry.code for entry in entries} for code, entries in compiled_entries().items()}
    try:
        yield
    finally:
        changed = [
            code
            for code, entries in compiled_entries().items()
            if any(entry.code is not None and entry.code not in before.get(code, ()) for entry in entries)
        ]
        if changed:
            _reset_codes(changed)


def _reset_codes(codes: list[types.CodeType]) -> None:
    """Drop every compiled entry of ``codes``, under dynamo's compile lock (as ``torch._dynamo.reset`` does)."""
    convert_frame = sys.modules["torch._dynamo.convert_frame"]
    reset_code = torch._C._dynamo.eval_frame.reset_code
    with convert_frame.compile_lock:
        for code in codes:
            reset_code(code)


def _ambient_guards_for_entries_without_any() -> list:
    """Give every compiled entry without guards to tell it apart (no diff guard manager) the guards of its root, which
    check only the ambient state; returns the guard managers changed."""
    given = []
    for entries in compiled_entries().values():
        for entry in entries:
            manager = getattr(entry, "guard_manager", None)
            if getattr(manager, "diff_guard_root", 0) is not None or not _has_diff_guard_parts(manager):
                continue
            if not hasattr(manager, "invalidation_reason"):  # an entry torch invalidated stays a miss
                manager.diff_guard_sources.add(manager.root.get_source())
                manager.populate_diff_guard_manager()
                given.append(manager)
    return given


def _has_diff_guard_parts(manager: Any) -> bool:
    """Whether a guard manager has the parts its diff guards are built from (else it is left as it is)."""
    return all(hasattr(manager, a) for a in ("root", "diff_guard_sources", "populate_diff_guard_manager"))


def _take_back_ambient_guards(given: list) -> None:
    """Undo ``_ambient_guards_for_entries_without_any`` where dynamo did not recompute the sources meanwhile (a new
    entry of the same frame: then they are dynamo's own again)."""
    for manager in given:
        root = manager.root.get_source()
        if list(manager.diff_guard_sources) == [root]:
            manager.diff_guard_sources.discard(root)
            manager.populate_diff_guard_manager()


@functools.cache
def _unguarded_stance_setter() -> Callable | None:
    """``torch.compiler.set_stance`` where it has ``skip_guard_eval_unsafe`` (torch 2.6 and later), else None."""
    set_stance = getattr(torch.compiler, "set_stance", None)
    if set_stance is None or "skip_guard_eval_unsafe" not in inspect.signature(set_stance).parameters:
        return None
    return set_stance


def _mark_recorder_code() -> None:
    """Mark the recorder's code for dynamo to run without compiling it, as dynamo marks torch's own functions once it
    has seen them (where this torch cannot, such frames are refused and profile() takes its ways out)."""
    skip_code = getattr(sys.modules.get("torch._dynamo.eval_frame"), "skip_code", None)
    if skip_code is not None and not _marked:
        for code in recorder_codes():
            skip_code(code)
        _marked.append(True)  # once per process: torch._dynamo.reset() forgets only the code dynamo compiled


_marked: list[bool] = []


KEPT, COMPILED_UNPATCHED, MODULE_SCOPES_ONLY = "kept", "compiled_unpatched", "module_scopes_only"


def record_keeping_compiled_code(
    record: Callable[[bool], T], unpatched_pass: Callable[[], Any], forget: Callable[[], Any]
) -> tuple[T, str]:
    """``record(functions)`` (the patched passes, the functions patched or not) with compiled code that never sees
    the patches; returns its result and how (manifest ``compiled_code``):

    - ``kept``: the model's compiled frames all had entries from before the patches, or torch refused one and every
      frame dynamo has given up on (given_up_frames.py) then ran eagerly, as it runs a miss of those unrecorded;
    - ``compiled_unpatched``: torch refused a frame with none (a model run for the first time by a profile() of 0 or
      1 warm-ups): one more pass ran unpatched, so dynamo compiled it as the user runs it, then ``record`` again
      (the frames given up on eagerly);
    - ``module_scopes_only``: refused again (the model compiles new code on every pass): recorded with only the
      modules and the compiled modules scoped, the functions unpatched, so dynamo compiles whatever it needs.

    ``forget`` drops what a refused attempt counted. A warning says which way out was taken.
    """
    try:
        return record(True), KEPT
    except Exception as error:  # noqa: BLE001 - raised again unless the stance made it
        if not refused_under_stance(error, compiled_entries):
            raise
    given_up = given_up_codes(compiled_entries())
    if given_up:  # their hits run compiled where they can: eager only once a miss was refused
        forget()
        try:
            with run_eagerly(given_up):
                result = record(True)
            warn_given_up(given_up)
            return result, KEPT
        except Exception as error:  # noqa: BLE001 - raised again unless the stance made it
            if not refused_under_stance(error, compiled_entries):
                raise
    forget()
    unpatched_pass()
    try:
        with run_eagerly(given_up):
            result = record(True)
        warn_given_up(given_up)
        warnings.warn(
            "kernelscope: the model ran torch.compile'd code that was not compiled yet, so it ran one more pass "
            "without the scopes first, for dynamo to compile it as you run it, not through the recorder",
            RuntimeWarning,
            stacklevel=4,
        )
        return result, COMPILED_UNPATCHED
    except Exception as error:  # noqa: BLE001 - raised again unless the stance made it
        if not refused_under_stance(error, compiled_entries):
            raise
    forget()
    result = record(False)
    warnings.warn(
        "kernelscope: the model's torch.compile'd code compiled new code on every pass, which it cannot do with "
        "the functions patched, so only modules and compiled modules were scoped: calls are not named by "
        "function (the kernels of a compiled module are torch.compile's)",
        RuntimeWarning,
        stacklevel=4,
    )
    return result, MODULE_SCOPES_ONLY
