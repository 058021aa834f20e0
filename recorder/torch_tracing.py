"""torch's own tracing is not the program's: while ``torch.export`` (strict or not) traces a module, the code it runs
(the traced module's forward on fake tensors, its own bookkeeping through Tensor methods, the fake copies of the
parameters) is its machinery's, whatever the program called it from. torch marks most of that time itself with the
context manager that sets ``torch.compiler.is_compiling()`` for export (``_compiling_state_context``, which
``torch._dynamo.export`` enters too); a non-strict export makes its fake parameters before, in ``_non_strict_export``
(``_strict_export`` likewise). While recorded, every binding of them in torch's loaded modules is a wrapper that,
inside torch's, steps the calling thread aside as a thread the recording does not scope (recorder/threads.py): every
wrapper leaves its calls alone there, with no test more on the per-call path than the thread's, which it makes
anyway. The bindings are put back afterwards, also in a torch module imported meanwhile that bound one by name.
``torch.export._trace`` is imported first where it is not yet (once a process, a fraction of a second after the
inductor import that the profiler's start makes), so that a first export in the recorded pass is seen too. Dynamo's
own tracing needs none of this: every wrapper steps aside while it traces (``compiled.dynamo_tracing``). Neither does
torch.fx mark its symbolic tracing (``symbolic_trace``, a library's Tracer subclass): ``Tracer.trace`` steps aside
likewise, so that the calls it makes on Proxies are not sampled as the program's calls; not make_fx's tracers, whose
tracing runs the program's calls on real tensors too, kernels and all."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from threading import get_ident
from typing import Any

from .calls import INSIDE_CALL, OTHER_THREAD, SCOPED_THREADS, scope_this_thread, unscope_this_thread
from .wrapping import wraps

_CONTEXTS = (("torch._export.utils", "_compiling_state_context"),)
_FUNCTIONS = (("torch.export._trace", "_non_strict_export"), ("torch.export._trace", "_strict_export"))
_METHODS = (("torch.fx._symbolic_trace", "Tracer", "trace"),)  # set on the class: subclasses reach it by super()
_REAL_TRACERS = ("torch.fx.experimental.proxy_tensor", "PythonKeyTracer")  # make_fx's: runs real kernels as it traces
_CALLABLES = frozenset(name for _, name in _CONTEXTS + _FUNCTIONS)


@contextmanager
def torch_tracing_unscoped() -> Iterator[None]:
    """The block with torch's tracing contexts stepping their thread aside (module docstring)."""
    try:
        importlib.import_module("torch.export._trace")
    except Exception:  # noqa: BLE001 - a torch without it (or broken): export is then not the program's to trace
        pass
    wrappers: dict[str, tuple[Any, Any]] = {}  # name -> (torch's function, its wrapper)
    for module_name, name in _CONTEXTS + _FUNCTIONS:
        original = getattr(sys.modules.get(module_name), name, None)
        if callable(original):
            aside = _stepping_aside(original) if (module_name, name) in _CONTEXTS else _called_aside(original)
            wrappers[name] = original, wraps(aside, original, name)
    methods = []  # (class, name, torch's function) of each method stepping aside
    for module_name, class_name, name in _METHODS:
        owner = getattr(sys.modules.get(module_name), class_name, None)
        original = vars(owner).get(name) if isinstance(owner, type) else None
        if callable(original):
            methods.append((owner, name, original))
    _rebind(wrappers, 0, 1)
    for owner, name, original in methods:
        setattr(owner, name, wraps(_traced_aside(original), original, name))
    try:
        yield
    finally:
        for owner, name, original in methods:
            setattr(owner, name, original)
        _rebind(wrappers, 1, 0)


# The modules already looked through, by name (a module imported again under its name, or removed and put back, is
# looked through again), and of them the torch modules that bound a name of _CONTEXTS or _FUNCTIONS. A module binds
# those at its import, so one seen before is not looked through again: with a thousand torch modules loaded, each
# recording's two scans of them all cost a small model's profile() ~3 ms.
_seen: dict[str, Any] = {}
_holders: dict[str, Any] = {}


def _rebind(wrappers: dict[str, tuple[Any, Any]], old: int, new: int) -> None:
    """In every loaded torch module, each name of ``wrappers`` bound to its pair's ``old`` item rebound to ``new``."""
    if not _unchanged_since_seen():
        for module_name in _seen.keys() - sys.modules.keys():  # gone: looked through again if it comes back
            del _seen[module_name]
        for module_name, module in [(k, m) for k, m in list(sys.modules.items()) if _seen.get(k) is not m]:
            _seen[module_name] = module
            _holders.pop(module_name, None)
            torch_module = module_name == "torch" or module_name.startswith("torch.")
            if torch_module and module is not None and not _CALLABLES.isdisjoint(vars(module)):
                _holders[module_name] = module
    for module_name, module in list(_holders.items()):
        if sys.modules.get(module_name) is not module:  # removed or replaced since
            del _holders[module_name]
            continue
        namespace = vars(module)
        for name, pair in wrappers.items():
            if namespace.get(name) is pair[old]:
                namespace[name] = pair[new]


def _unchanged_since_seen() -> bool:
    """Whether ``sys.modules`` holds the modules last looked through, under the same names: one comparison in C (the
    same object is equal without its ``__eq__``; a module is equal only to itself) where the scan of 2,800 modules
    in Python cost ~0.3 ms, twice a recording."""
    try:
        return sys.modules == _seen
    except Exception:  # noqa: BLE001 - an object in sys.modules whose __eq__ fails: looked through as any other
        return False


def _stepping_aside(context: Any) -> Any:
    def context_stepping_aside(*args: Any, **kwargs: Any) -> Any:
        return _aside(context(*args, **kwargs))

    return context_stepping_aside


def _called_aside(function: Any) -> Any:
    def called_aside(*args: Any, **kwargs: Any) -> Any:
        with _aside(nullcontext()):
            return function(*args, **kwargs)

    return called_aside


def _traced_aside(trace: Any) -> Any:
    def traced_aside(tracer: Any, *args: Any, **kwargs: Any) -> Any:
        real = getattr(sys.modules.get(_REAL_TRACERS[0]), _REAL_TRACERS[1], None)
        if real is not None and isinstance(tracer, real):
            return trace(tracer, *args, **kwargs)
        with _aside(nullcontext()):
            return trace(tracer, *args, **kwargs)

    return traced_aside


@contextmanager
def _aside(context: Any) -> Iterator[Any]:
    """``context`` entered, and inside it the calling thread one the recording does not scope."""
    with context as value:
        token, scoped = INSIDE_CALL.set(OTHER_THREAD), get_ident() in SCOPED_THREADS
        if scoped:
            unscope_this_thread()
        try:
            yield value
        finally:
            if scoped:
                scope_this_thread()
            INSIDE_CALL.reset(token)
