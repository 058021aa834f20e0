"""Scope annotations around module forwards and ``torch.nn.functional`` calls, for one recording.

Scopes use ``torch._C._profiler._RecordFunctionFast`` (about 1 µs per scope against ~7 µs for
``torch.profiler.record_function``, measured on the CPU with torch 2.13); it appears in the trace as a
``cpu_op`` named exactly like the scope. Names: ``ks.module:<dotted name>`` and
``ks.fn:<function>#<sample id>`` (``ks.fn:<function>`` when samples of that function are not collected).

Everything patched is put back exactly: ``F.<name>`` is the identical object again, and a module that
had no instance attribute ``forward`` has none afterwards.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from kernelscope.analyzer.rundir import FUNCTION_PREFIX, MODULE_PREFIX, SAMPLE_SEPARATOR
from torch import nn

from .samples import SampleBook

_Scope = torch._C._profiler._RecordFunctionFast
_PATCHABLE_MODULES = {F.__name__, "torch", "torch._C._nn"}
_MISSING = object()


def functional_names() -> list[str]:
    """Public functions of ``torch.nn.functional`` that get a scope (aitune's rule, so names match)."""
    names = []
    for name, value in vars(F).items():
        if name.startswith("_") or not (inspect.isfunction(value) or inspect.isbuiltin(value)):
            continue
        if getattr(value, "__module__", None) in _PATCHABLE_MODULES:
            names.append(name)
    return names


def _module_forward(forward: Any, scope_name: str):
    def forward_in_scope(*args, **kwargs):
        with _Scope(scope_name):
            return forward(*args, **kwargs)

    return forward_in_scope


def _functional(function: Any, name: str, book: SampleBook | None):
    plain = FUNCTION_PREFIX + name
    if book is None:

        def call_in_scope(*args, **kwargs):
            with _Scope(plain):
                return function(*args, **kwargs)

    else:
        scope_names: list[str] = []
        prefix = plain + SAMPLE_SEPARATOR
        record = book.record

        def call_in_scope(*args, **kwargs):
            sample_id = record(name, args, kwargs)
            if sample_id == len(scope_names):
                scope_names.append(f"{prefix}{sample_id}")
            with _Scope(scope_names[sample_id]):
                return function(*args, **kwargs)

    call_in_scope.__name__ = getattr(function, "__name__", name)
    call_in_scope.__qualname__ = getattr(function, "__qualname__", name)
    call_in_scope.__doc__ = getattr(function, "__doc__", None)
    call_in_scope.__wrapped__ = function
    return call_in_scope


@contextmanager
def instrumented(
    named_modules: Iterable[tuple[str, nn.Module]], book: SampleBook, collect: set[str] | None
) -> Iterator[None]:
    """Scopes on every module forward and functional call for the duration of the block.

    ``collect``: names whose samples go to ``book`` (None = all).
    """
    saved_forwards: list[tuple[nn.Module, Any]] = []
    saved_functions: list[tuple[str, Any]] = []
    try:
        for name, module in named_modules:
            before = vars(module).get("forward", _MISSING)
            saved_forwards.append((module, before))
            vars(module)["forward"] = _module_forward(module.forward, MODULE_PREFIX + name)
        for name in functional_names():
            function = getattr(F, name)
            saved_functions.append((name, function))
            sampled = collect is None or name in collect
            setattr(F, name, _functional(function, name, book if sampled else None))
        yield
    finally:
        for name, function in reversed(saved_functions):
            setattr(F, name, function)
        for module, before in reversed(saved_forwards):
            if before is _MISSING:
                vars(module).pop("forward", None)
            else:
                vars(module)["forward"] = before
