"""Scope annotations around module forwards and calls, for one recording.

Scopes use ``torch._C._profiler._RecordFunctionFast`` (about 1 µs per scope against ~7 µs for
``torch.profiler.record_function``, measured on the CPU with torch 2.13); it appears in the trace as a
``cpu_op`` named exactly like the scope. Names: ``ks.module:<dotted name>`` and
``ks.fn:<call>#<sample id>`` (``ks.fn:<call>`` when samples of that call are not collected).

What is patched, all of it put back exactly afterwards (``F.<name>`` is the identical object again,
and a module that had no instance attribute ``forward`` has none):

- module forwards: an instance ``forward`` that opens the module's scope; the modules inside a
  ``torch.compile``d module are left alone (patching them would make dynamo recompile), and the
  compiled module's own call is scoped as the call ``torch.compile``;
- the ``torch.nn.functional`` namespace: every public function, so calls between functionals
  (``F.multi_head_attention_forward`` -> ``F.linear``) are each scoped and the innermost owns its kernels;
- with ``calls="all"`` (recorder/calls.py): torch-level calls outside functionals, functionals held by
  stored references, and ``torch.cuda.CUDAGraph.replay``.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from kernelscope.analyzer.rundir import FUNCTION_PREFIX, MODULE_PREFIX, SAMPLE_SEPARATOR
from torch import nn

from .calls import STATE, stored_reference_sites, torch_call_targets
from .samples import SampleBook

_Scope = torch._C._profiler._RecordFunctionFast
_PATCHABLE_MODULES = {F.__name__, "torch", "torch._C._nn"}
_MISSING = object()
CALLS = ("all", "functional")
GRAPH_REPLAY = "torch.cuda.CUDAGraph.replay"
COMPILED_CALL = "torch.compile"


def functional_names() -> list[str]:
    """Public functions of ``torch.nn.functional`` that get a scope (aitune's rule, so names match)."""
    names = []
    for name, value in vars(F).items():
        if name.startswith("_") or not (inspect.isfunction(value) or inspect.isbuiltin(value)):
            continue
        if getattr(value, "__module__", None) in _PATCHABLE_MODULES:
            names.append(name)
    return names


def _scope_namer(name: str, book: SampleBook | None):
    """A function (args, kwargs) -> scope name; it records the call's sample when ``book`` is given."""
    plain = FUNCTION_PREFIX + name
    if book is None:
        return lambda args, kwargs: plain
    names: list[str] = []
    prefix = plain + SAMPLE_SEPARATOR
    record = book.record

    def scope_name(args, kwargs):
        sample_id = record(name, args, kwargs)
        if sample_id == len(names):
            names.append(f"{prefix}{sample_id}")
        return names[sample_id]

    return scope_name


def _wraps(wrapper: Any, function: Any, name: str) -> Any:
    wrapper.__name__ = getattr(function, "__name__", name)
    wrapper.__qualname__ = getattr(function, "__qualname__", name)
    wrapper.__doc__ = getattr(function, "__doc__", None)
    wrapper.__wrapped__ = function
    return wrapper


def _functional(function: Any, name: str, book: SampleBook | None, torch_calls: bool):
    """A functional's wrapper: always scoped, since functionals nest and the innermost owns kernels.

    ``torch_calls``: torch-level calls are scoped too, so this call must mark itself open for them.
    """
    scope_name = _scope_namer(name, book)
    if not torch_calls:

        def call_in_scope(*args, **kwargs):
            with _Scope(scope_name(args, kwargs)):
                return function(*args, **kwargs)

        return _wraps(call_in_scope, function, name)
    state = STATE

    def call_in_scope(*args, **kwargs):
        scope = scope_name(args, kwargs)
        state.depth += 1
        try:
            with _Scope(scope):
                return function(*args, **kwargs)
        finally:
            state.depth -= 1

    return _wraps(call_in_scope, function, name)


def _torch_call(function: Any, name: str, book: SampleBook | None):
    """A torch-level call's wrapper: scoped only outside any other scoped call (inside a functional,
    ``torch.bmm`` or ``x.view`` are that functional's business)."""
    scope_name = _scope_namer(name, book)
    state = STATE

    def call_in_scope(*args, **kwargs):
        if state.depth:
            return function(*args, **kwargs)
        scope = scope_name(args, kwargs)
        state.depth = 1
        try:
            with _Scope(scope):
                return function(*args, **kwargs)
        finally:
            state.depth = 0

    return _wraps(call_in_scope, function, name)


def _module_forward(forward: Any, scope_name: str):
    def forward_in_scope(*args, **kwargs):
        with _Scope(scope_name):
            return forward(*args, **kwargs)

    return forward_in_scope


def _compiled_forward(forward: Any, scope_name: str, call: Any):
    state = STATE

    def compiled_in_scope(*args, **kwargs):
        with _Scope(scope_name), _Scope(call(args, kwargs)):
            state.depth += 1
            try:
                return forward(*args, **kwargs)
            finally:
                state.depth -= 1

    return compiled_in_scope


def _graph_replay(replay: Any, call: Any):
    def replay_in_scope(self, *args, **kwargs):
        with _Scope(call((self, *args), kwargs)):
            return replay(self, *args, **kwargs)

    return replay_in_scope


def _optimized_module_type():
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")  # not imported: nothing was compiled
    return getattr(eval_frame, "OptimizedModule", None)


class _Patches:
    """Attribute replacements on dicts and classes, undone in reverse order, exactly."""

    def __init__(self) -> None:
        self.saved: list[tuple[Any, str, Any]] = []

    def set_item(self, owner: dict, key: str, value: Any) -> None:
        self.saved.append((owner, key, owner.get(key, _MISSING)))
        owner[key] = value

    def set_attribute(self, owner: Any, key: str, value: Any) -> None:
        """For classes and modules, whose ``__dict__`` cannot be written directly (classes) or is
        written like any other (modules)."""
        self.saved.append((owner, key, vars(owner).get(key, _MISSING)))
        setattr(owner, key, value)

    def undo(self) -> None:
        while self.saved:
            owner, key, before = self.saved.pop()
            if isinstance(owner, dict):
                if before is _MISSING:
                    owner.pop(key, None)
                else:
                    owner[key] = before
            elif before is _MISSING:
                delattr(owner, key)
            else:
                setattr(owner, key, before)


@contextmanager
def instrumented(
    named_modules: Iterable[tuple[str, nn.Module]],
    book: SampleBook,
    collect: set[str] | None,
    calls: str = "all",
) -> Iterator[None]:
    """Scopes on every module forward and call for the duration of the block.

    ``collect``: names whose samples go to ``book`` (None = all). ``calls``: ``"all"`` or ``"functional"``
    (only the ``torch.nn.functional`` namespace, as aitune's profiler sees it).
    """
    if calls not in CALLS:
        raise ValueError(f"calls must be one of {CALLS}, not {calls!r}")

    def sampled(name: str) -> SampleBook | None:
        return book if collect is None or name in collect else None

    named_modules = list(named_modules)
    patches = _Patches()
    try:
        compiled_type = _optimized_module_type()
        compiled_roots: list[str] = []
        observed = []
        for name, module in named_modules:
            if any(name.startswith(root + ".") for root in compiled_roots):
                continue
            observed.append(module)
            scope = MODULE_PREFIX + name
            if compiled_type is not None and isinstance(module, compiled_type):
                compiled_roots.append(name)
                wrapper = _compiled_forward(module.forward, scope, _scope_namer(COMPILED_CALL, sampled(COMPILED_CALL)))
            else:
                wrapper = _module_forward(module.forward, scope)
            patches.set_item(vars(module), "forward", wrapper)

        wrappers: dict[int, Any] = {}  # id(original) -> its wrapper, for stored references
        originals: dict[int, Any] = {}
        for name in functional_names():
            function = getattr(F, name)
            wrapper = wrappers.get(id(function)) or _functional(function, name, sampled(name), calls == "all")
            wrappers[id(function)], originals[id(function)] = wrapper, function
            patches.set_item(vars(F), name, wrapper)
        if calls == "all":
            for owner, attribute, name in torch_call_targets():
                function = getattr(owner, attribute)
                wrapper = wrappers.get(id(function))  # torch.conv2d is F.conv2d: keep the functional's name
                if wrapper is None:
                    wrapper = _torch_call(function, name, sampled(name))
                    wrappers[id(function)], originals[id(function)] = wrapper, function
                patches.set_attribute(owner, attribute, wrapper)
            for owner, key, original in stored_reference_sites(observed, originals):
                patches.set_item(owner, key, wrappers[id(original)])
            graph = torch.cuda.CUDAGraph
            replay = _graph_replay(graph.replay, _scope_namer(GRAPH_REPLAY, sampled(GRAPH_REPLAY)))
            patches.set_attribute(graph, "replay", replay)
        yield
    finally:
        patches.undo()
