"""Scope annotations around module forwards and calls, for one recording.

Scopes use ``torch._C._profiler._RecordFunctionFast`` (about 1 µs per scope against ~7 µs for
``torch.profiler.record_function``, measured on the CPU with torch 2.13); it appears in the trace as a
``cpu_op`` named exactly like the scope. Names: ``ks.module:<dotted name>`` and
``ks.fn:<call>#<sample id>`` (``ks.fn:<call>`` when samples of that call are not collected).

Three mechanisms, all removed exactly afterwards (``F.<name>`` is the identical object again, and a
module that had no instance attribute ``forward`` has none):

- module forwards: an instance ``forward`` that opens the module's scope; the modules inside a
  ``torch.compile``d module are left alone (patching them would make dynamo recompile), the compiled
  module's own call is scoped as the call ``torch.compile``;
- the ``torch.nn.functional`` namespace: every public function, so calls between functionals
  (``F.multi_head_attention_forward`` -> ``F.linear``) are each scoped and the innermost owns its kernels;
- with ``calls="all"``, a ``TorchFunctionMode`` (recorder/calls.py) for stored references to
  functionals and torch-level calls outside any functional (also in threads started during the
  recording), and ``torch.cuda.CUDAGraph.replay``.
"""

from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from kernelscope.analyzer.rundir import FUNCTION_PREFIX, MODULE_PREFIX, SAMPLE_SEPARATOR
from torch import nn

from .calls import STATE, CallScopes, suspended
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
    """A function (args, kwargs, guard=True) -> scope name; it records the call's sample in ``book``.

    ``guard``: compute the sample key with torch-function dispatch off. Reading shapes and strides
    while CallScopes is active would dispatch every attribute access to it (measured on the CPU: 29 µs
    instead of 3 µs for three tensors); callers that already took the mode off pass False.
    """
    plain = FUNCTION_PREFIX + name
    if book is None:
        return lambda args, kwargs, guard=True: plain
    names: list[str] = []
    prefix = plain + SAMPLE_SEPARATOR
    record = book.record
    disabled = torch._C.DisableTorchFunction

    def scope_name(args, kwargs, guard=True):
        if guard:
            with disabled():
                sample_id = record(name, args, kwargs)
        else:
            sample_id = record(name, args, kwargs)
        if sample_id == len(names):
            names.append(f"{prefix}{sample_id}")
        return names[sample_id]

    return scope_name


_stack_len = torch._C._len_torch_function_stack
_stack_at = torch._C._get_function_stack_at
_stack_pop = torch._C._pop_torch_function_stack
_stack_push = torch._C._push_on_torch_function_stack


def _functional(function: Any, name: str, book: SampleBook | None, mode: CallScopes | None):
    """The namespace wrapper of one functional.

    With CallScopes active it takes the mode off for the call: the call is scoped here, the calls
    inside it belong to it anyway, and a Python functional would otherwise pay for a second,
    Python-level dispatch to the mode (~5 µs per call measured on the CPU).
    """
    scope_name = _scope_namer(name, book)
    if mode is None:

        def call_in_scope(*args, **kwargs):
            with _Scope(scope_name(args, kwargs, False)):
                return function(*args, **kwargs)

    else:
        state = STATE

        def call_in_scope(*args, **kwargs):
            depth = _stack_len()
            if depth and _stack_at(depth - 1) is mode:
                _stack_pop()
                try:
                    with _Scope(scope_name(args, kwargs, False)):
                        return function(*args, **kwargs)
                finally:
                    _stack_push(mode)
            # Another mode is on top of ours (or none is active on this thread): let ours recognize
            # the call as already scoped.
            scope = scope_name(args, kwargs)
            state.depth += 1
            state.pending = function
            try:
                with _Scope(scope):
                    return function(*args, **kwargs)
            finally:
                state.pending = None
                state.depth -= 1

    call_in_scope.__name__ = getattr(function, "__name__", name)
    call_in_scope.__qualname__ = getattr(function, "__qualname__", name)
    call_in_scope.__doc__ = getattr(function, "__doc__", None)
    call_in_scope.__wrapped__ = function
    return call_in_scope


def _module_forward(forward: Any, scope_name: str):
    def forward_in_scope(*args, **kwargs):
        with _Scope(scope_name):
            return forward(*args, **kwargs)

    return forward_in_scope


def _compiled_forward(forward: Any, scope_name: str, call: Any, mode: CallScopes | None):
    state = STATE

    def compiled_in_scope(*args, **kwargs):
        with _Scope(scope_name), _Scope(call(args, kwargs)), suspended(mode):
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


def _thread_bootstrap(bootstrap: Any, mode: CallScopes):
    """Threads started during the recording get the mode too (it is per thread), so their calls are named."""

    def bootstrap_with_scopes(self):
        with mode:
            return bootstrap(self)

    return bootstrap_with_scopes


def _optimized_module_type():
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")  # not imported: nothing was compiled
    return getattr(eval_frame, "OptimizedModule", None)


def _set(owner_dict: dict, key: str, value: Any, saved: list) -> None:
    saved.append((owner_dict, key, owner_dict.get(key, _MISSING)))
    owner_dict[key] = value


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

    saved: list[tuple[dict, str, Any]] = []
    with ExitStack() as stack:
        try:
            mode = None
            originals = {name: getattr(F, name) for name in functional_names()}
            if calls == "all":
                mode = CallScopes({f: n for n, f in originals.items()}, book, collect, torch_calls=True)
            compiled_type = _optimized_module_type()
            compiled_roots: list[str] = []
            for name, module in named_modules:
                if any(name.startswith(root + ".") for root in compiled_roots):
                    continue
                scope = MODULE_PREFIX + name
                if compiled_type is not None and isinstance(module, compiled_type):
                    compiled_roots.append(name)
                    call = _scope_namer(COMPILED_CALL, sampled(COMPILED_CALL))
                    wrapper = _compiled_forward(module.forward, scope, call, mode)
                else:
                    wrapper = _module_forward(module.forward, scope)
                _set(vars(module), "forward", wrapper, saved)
            for name, function in originals.items():
                _set(vars(F), name, _functional(function, name, sampled(name), mode), saved)
            if mode is not None:
                graph_type = torch.cuda.CUDAGraph
                replay = _graph_replay(graph_type.replay, _scope_namer(GRAPH_REPLAY, sampled(GRAPH_REPLAY)))
                _set_class_attribute(graph_type, "replay", replay, saved)
                bootstrap = getattr(threading.Thread, "_bootstrap_inner", None)
                if bootstrap is not None:
                    _set_class_attribute(
                        threading.Thread, "_bootstrap_inner", _thread_bootstrap(bootstrap, mode), saved
                    )
                stack.enter_context(mode)
            yield
        finally:
            stack.close()
            for owner, key, before in reversed(saved):
                if isinstance(owner, type):
                    _restore_class_attribute(owner, key, before)
                elif before is _MISSING:
                    owner.pop(key, None)
                else:
                    owner[key] = before


def _set_class_attribute(cls: type, key: str, value: Any, saved: list) -> None:
    saved.append((cls, key, vars(cls).get(key, _MISSING)))
    setattr(cls, key, value)


def _restore_class_attribute(cls: type, key: str, before: Any) -> None:
    if before is _MISSING:
        delattr(cls, key)
    else:
        setattr(cls, key, before)
