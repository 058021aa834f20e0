"""A torch.compile'd method of a recorded module that the module does not hold (``torch.compile(model.generate)``,
kept by the program): found at its call, through the function of torch's that every compiled function calls just
before it runs what it wraps (``_callback_from_stance``).

Its graphs guard the module's ``__dict__`` (``generate()`` reads ``self.forward``: "no instance ``forward``"), which
the recorder's instance attributes fail: torch refused its code and the recording fell back to module scopes. While it
runs, the module and the modules under it hold their own values again, in the module's scope and the call scope
``torch.compile``, as a compiled method the module holds runs (compiled_calls.py); the functions it calls eagerly
between its graphs keep their own scopes.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from .compiled import dynamo_tracing
from .scope_gate import OPEN as scopes_open
from .wrapping import wraps

_Scope = torch._C._profiler._RecordFunctionFast
# a module's own calls, compiled: the recorder finds those where the module or its wrapper holds them (compiled.py)
_CALLS = frozenset({"__call__", "_call_impl", "_wrapped_call_impl", "forward"})


def eval_frame_module() -> Any:
    """torch's module whose ``_callback_from_stance`` every compiled function calls, or None where it has none."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return eval_frame if callable(getattr(eval_frame, "_callback_from_stance", None)) else None


def callback_seeing_compiled_methods(original: Callable, held_of: Callable[[Any], tuple | None], missing: Any):
    """``_callback_from_stance`` that, called by a compiled function (torch's ``compile_wrapper``) of a method of a
    module ``held_of`` knows (it gives the module's patches, as ``with_own_values`` takes them, its scope name and
    its call namer), puts the module's own values back and opens its scopes, undone by a cleanup added to the ones
    ``compile_wrapper`` runs when the call ends, however it ends."""

    def callback_from_stance(callback):
        caller = sys._getframe(1)
        if caller.f_code.co_name == "compile_wrapper" and not dynamo_tracing():
            _see(caller.f_locals, held_of, missing)
        return original(callback)

    return wraps(callback_from_stance, original)


def _see(local: dict, held_of: Callable[[Any], tuple | None], missing: Any) -> None:
    fn, cleanups = _method_wrapped(local.get("fn")), local.get("cleanups")
    if not isinstance(cleanups, list) or getattr(getattr(fn, "__func__", None), "__name__", "__call__") in _CALLS:
        return
    found = held_of(getattr(fn, "__self__", None))
    if found is None:
        return
    held, scope_name, namer, _ = found
    swapped = own_values_put_back(held, missing)
    call_scope = namer(local.get("args", ()), local.get("kwargs", {}))  # every pass: its samples are keyed
    scopes = [_Scope(scope_name), _Scope(call_scope)] if scopes_open[0] else []
    for scope in scopes:
        scope.__enter__()

    def cleanup() -> None:
        for scope in reversed(scopes):
            scope.__exit__(None, None, None)
        recorders_put_back(swapped, missing)

    cleanups.append(cleanup)


def _method_wrapped(fn: Any) -> Any:
    """The bound method ``fn`` is or wraps: torch compiles a function it would otherwise skip, such as a method
    decorated by ``torch.no_grad()`` (transformers' ``generate``) under torch 2.11, through ``wrap_inline``'s
    ``functools.wraps`` wrapper, which holds the method as ``__wrapped__``."""
    for _ in range(8):  # a few decorators deep; a longer __wrapped__ chain is not torch's
        if fn is None or isinstance(fn, types.MethodType):
            return fn
        fn = vars(fn).get("__wrapped__") if hasattr(fn, "__dict__") else None
    return None


def with_own_values(compiled: Any, held: list, missing: Any) -> Any:
    """``compiled`` run with the values ``held`` ((dict, key, the model's value, the recorder's), as _Patches saves
    them; ``missing``: their marker of an attribute that was not there) put back while it runs, and the recorder's
    after."""

    def run_with_own_values(*args, **kwargs):
        swapped = own_values_put_back(held, missing)
        try:
            return compiled(*args, **kwargs)
        finally:
            recorders_put_back(swapped, missing)

    return wraps(run_with_own_values, compiled)


def own_values_put_back(held: list, missing: Any) -> list:
    """Put the model's values of ``held`` (as ``with_own_values`` takes them) back where the recorder's are; returns
    those swapped."""
    swapped = [(owner, key, own, put) for owner, key, own, put in held if owner.get(key, missing) is put]
    for owner, key, own, _ in swapped:
        if own is missing:
            del owner[key]
        else:
            owner[key] = own
    return swapped


def recorders_put_back(swapped: list, missing: Any) -> None:
    """Undo ``own_values_put_back``, where the program did not change a value meanwhile."""
    for owner, key, own, put in swapped:
        if owner.get(key, missing) is own:
            owner[key] = put
