"""A backward the model starts inside its open scopes (``torch.autograd.grad`` in a forward, in an autograd
Function's forward) runs, off the CPU, on autograd's device worker threads, where those scopes are not open: rows
are attributed by the scopes of their own thread, so its operators there had no module and no call, and a hook's
calls there were calls of their own. While recorded, such a backward's nodes reopen the starting thread's scopes and
call state (INSIDE_CALL) around their own work on any other thread (a pre-hook and a hook of each node of its
graph, removed when it returns): what they run there is the open call's, as on the starting thread.

The open scopes are read from the starting thread's frames at the backward's start (the recorder's wrappers that open
one hold its name in a local: ``scope_name``, ``call_scope``, ``scope``), so no call pays for it. The engine's own
operator around a node (``evaluate_function: MulBackward0``) runs before its pre-hooks, so it stays outside them."""

from __future__ import annotations

import functools
import sys
import types
from threading import get_ident
from typing import Any

import torch

from .calls import INSIDE_CALL, OTHER_THREAD
from .scope_gate import OPEN as scopes_open
from .wrapping import wraps

_Scope = torch._C._profiler._RecordFunctionFast
_NAMES = ("scope_name", "call_scope", "scope")  # the locals of the scoping wrappers, in the order they open them
_LARGEST_GRAPH = 100_000  # nodes hooked: a bound on the walk of a graph built by a program gone wrong


def backward_in_open_scopes(run_backward: Any) -> Any:
    """``torch.autograd._engine_run_backward`` that, started in open scopes of a recording for outputs off the CPU,
    has the nodes of the backward's graph reopen them on the threads that run them."""

    def run_backward_in_scopes(t_outputs, *args, **kwargs):
        state = INSIDE_CALL.get()
        if not scopes_open[0] or state is OTHER_THREAD or not _off_the_cpu(t_outputs):
            return run_backward(t_outputs, *args, **kwargs)
        names = _open_scopes(sys._getframe(1))
        if not names and state is False:  # nothing open: the worker's calls are outside calls, as here
            return run_backward(t_outputs, *args, **kwargs)
        reopened = _Reopened(names, state, get_ident())
        handles = []
        try:
            for node in _nodes(t_outputs):
                _hook(node, reopened, handles)
            return run_backward(t_outputs, *args, **kwargs)
        finally:
            for handle in handles:
                handle.remove()
            reopened.close_all()

    return wraps(run_backward_in_scopes, run_backward)


def _off_the_cpu(outputs: Any) -> bool:
    tensors = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    return any(not isinstance(t, torch.Tensor) or t.device.type != "cpu" for t in tensors)


class _Reopened:
    """The scopes ``names`` opened on each thread other than ``starter`` at the first node it runs, and closed when
    the backward ends (autograd's final callback, on the thread that ran its last node; the rest by the starter,
    which torch's profiler records as the scope's end on another thread). ``state``: the call state each node runs
    in there (set and reset around the node: a thread's state must be reset on it)."""

    def __init__(self, names: list[str], state: Any, starter: int) -> None:
        self.names, self.state, self.starter = names, state, starter
        self.opened: dict[int, list] = {}  # thread -> its scopes, entered
        self.tokens: dict[int, list] = {}  # thread -> the call states its running nodes set

    def before(self, grad_outputs: Any) -> None:
        thread = get_ident()
        if thread == self.starter:
            return
        if thread not in self.opened:
            self.opened[thread] = [_Scope(name) for name in self.names]
            for scope in self.opened[thread]:
                scope.__enter__()
            torch.autograd.Variable._execution_engine.queue_callback(self.close_here)
        self.tokens.setdefault(thread, []).append(INSIDE_CALL.set(self.state))

    def after(self, grad_inputs: Any, grad_outputs: Any) -> None:
        tokens = self.tokens.get(get_ident())
        if tokens:
            INSIDE_CALL.reset(tokens.pop())

    def close_here(self) -> None:
        for scope in reversed(self.opened.pop(get_ident(), [])):
            scope.__exit__(None, None, None)

    def close_all(self) -> None:
        while self.opened:
            _, scopes = self.opened.popitem()
            for scope in reversed(scopes):
                scope.__exit__(None, None, None)


def _hook(node: Any, reopened: _Reopened, handles: list) -> None:
    try:
        handles.append(node.register_prehook(reopened.before))
        handles.append(node.register_hook(reopened.after))
    except RuntimeError:  # a node that takes no hooks: the scopes another node opened hold it too
        return


def _nodes(outputs: Any) -> list:
    tensors = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    roots = [getattr(t, "grad_fn", None) if isinstance(t, torch.Tensor) else getattr(t, "node", None) for t in tensors]
    seen: dict[int, Any] = {}
    stack = [node for node in roots if node is not None]
    while stack and len(seen) < _LARGEST_GRAPH:
        node = stack.pop()
        if id(node) not in seen:
            seen[id(node)] = node
            stack.extend(child for child, _ in node.next_functions if child is not None)
    return list(seen.values())


def _open_scopes(frame: Any) -> list[str]:
    """The names of the scopes the recorder's wrappers among ``frame`` and its callers hold open, outermost first."""
    codes, names, inner = _scoping_codes(), [], None
    while frame is not None:
        code = frame.f_code
        if code in codes and inner is not codes[_HANDLED]:  # a handled call's scope is opened by the frame inside
            local = frame.f_locals
            found = [local[name] for name in _NAMES if type(local.get(name)) is str]
            if code is codes[_CLASS] and local.get("folded_suffix") is not None:  # a folded module opens none
                found = []
            if found and code is codes[_FUNCTIONAL] and type(local.get("folded")) is str:
                found[-1] += local["folded"]  # a folded module's call: its scope names the module too
            names[:0] = found
        inner, frame = code, frame.f_back
    return names


_FUNCTIONAL, _HANDLED, _CLASS = "functional", "handled", "class"


@functools.cache
def _scoping_codes() -> dict:
    """The code of each recorder wrapper that opens a scope (a set's membership, and two by name)."""
    from . import class_forwards, compiled, hooked_calls, instrument, wrappers

    inner = {
        _FUNCTIONAL: _inner(wrappers._functional, "call_in_scope"),
        _HANDLED: wrappers._handled_in_scope.__code__,
        "marked": _inner(wrappers._marked_call, "call_in_scope"),
        "module": _inner(instrument._module_forward, "forward_in_scope"),
        "hooked": _inner(hooked_calls.call_in_scope, "call_impl_in_scope"),
        "value": _inner(class_forwards._value_in_scope, "forward_in_scope"),
        _CLASS: _inner(class_forwards._class_forward, "forward_through_the_class"),
        "compiled": _inner(compiled.compiled_forward, "compiled_in_scope"),
    }
    return _Codes(inner)


class _Codes(dict):
    """Codes by role, tested for membership by code."""

    def __init__(self, by_role: dict) -> None:
        super().__init__(by_role)
        self.codes = frozenset(code for code in by_role.values() if code is not None)

    def __contains__(self, code: object) -> bool:
        return code in self.codes


def _inner(function: Any, name: str) -> types.CodeType | None:
    return next((c for c in function.__code__.co_consts if type(c) is types.CodeType and c.co_name == name), None)
