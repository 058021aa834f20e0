"""The GraphModules dynamo handed to a ``torch.compile`` backend, found from the code it compiled, for
recorder/graph_code.py: a backend that runs the graph's own code (``return gm.forward``, as ``backend="eager"``
does, or ``return gm``) calls it through what it returned, a bound method made when it compiled, which no class
attribute set later reaches.

dynamo puts each compiled function it made in the globals of the frame it compiled (``__compiled_fn_<n>``, which
the entry's code reads); that function is the backend's result wrapped in closures (``disable``: no frame under it is
compiled). The walk reads those closures a few levels deep, and nothing else of the objects it meets."""

from __future__ import annotations

import sys
import types
from typing import Any

from .compiled import compiled_entries, optimized_module_type

_DEPTH = 4  # closures around a backend's result: disable's, a torch-function guard's, the backend's own


def dynamo_graphs(graph_module_type: type) -> list:
    """Every ``graph_module_type`` (fx's GraphModule) that a compiled entry alive now calls, each once."""
    found: dict[int, Any] = {}
    optimized = optimized_module_type()
    for function in compiled_functions():
        _graphs_in(function, graph_module_type, found, _DEPTH, optimized)
    return list(found.values())


def compiled_functions() -> list:
    """The compiled function (``__compiled_fn_<n>``) of every compiled entry alive now, each once."""
    return [function for function, *_ in compiled_functions_and_entries()]


def compiled_functions_and_entries() -> list[tuple[Any, set, list]]:
    """Each compiled function of the compiled entries alive now, once, with the codes of the entries that call it
    (the code a frame runs while its graph runs) and the ``(globals, name)`` they read it from."""
    entries = compiled_entries()
    found: dict[int, tuple[Any, set, list]] = {}
    by_file: dict[str, dict] | None = None
    for code, cached in entries.items():
        names = {n for entry in cached if entry.code is not None for n in entry.code.co_names if _compiled(n)}
        if not names:
            continue
        if by_file is None:  # the modules' globals by their file, made once: a frame's globals are its module's
            by_file = _namespaces_by_file()
        namespace = by_file.get(code.co_filename, {})
        for name in names:
            value = namespace.get(name)
            if value is not None:
                callers = {entry.code for entry in cached if entry.code is not None and name in entry.code.co_names}
                _, codes, homes = found.setdefault(id(value), (value, set(), []))
                codes.update(callers)
                if not any(home is namespace and key == name for home, key in homes):
                    homes.append((namespace, name))
    return list(found.values())


def values_in_closures(function: Any, wanted: Any, depth: int = 8) -> list:
    """The values ``wanted(value)`` accepts among those ``function`` closes over, ``depth`` closures deep, through
    the closures, what a function wraps (``__wrapped__``) and the attributes of torch's objects and autograd Function
    classes on the way (aot_autograd's wrappers around inductor's compiled graph)."""
    found: dict[int, Any] = {}
    pending, seen = [(function, depth)], set()
    while pending:
        value, left = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if wanted(value):
            found[id(value)] = value
            continue
        if left == 0:
            continue
        if type(value) is types.FunctionType:
            held = [vars(value)["__wrapped__"]] if "__wrapped__" in vars(value) else []  # inductor's inner_fn's graph
            for cell in value.__closure__ or ():
                try:
                    held.append(cell.cell_contents)
                except ValueError:  # an empty cell
                    pass
        elif type(value) is types.MethodType:
            held = [value.__self__, value.__func__]
        elif isinstance(value, type) and _walked(value.__module__) and _is_autograd_function(value):
            held = list(vars(value).values())  # aot_autograd's CompiledFunction: its graphs are class attributes
        elif _walked(type(value).__module__) and type(getattr(value, "__dict__", None)) is dict:
            held = list(vars(value).values())
        else:
            continue
        pending.extend((item, left - 1) for item in held)
    return list(found.values())


def _compiled(name: str) -> bool:
    return name.startswith("__compiled_fn")


def _namespaces_by_file() -> dict[str, dict]:
    namespaces = {}
    for module in list(sys.modules.values()):
        # read from the module's dict: a lazy module's __getattr__ may raise anything for a name it lacks
        path = vars(module).get("__file__") if type(module) is types.ModuleType else None
        if type(path) is str:
            namespaces[path] = vars(module)
    return namespaces


def _graphs_in(value: Any, graph_module_type: type, found: dict, depth: int, optimized: Any) -> None:
    """Add the GraphModules ``value`` is, binds (``gm.forward``) or closes over, ``depth`` closures deep."""
    if type(value) is types.MethodType:
        value = value.__self__
    elif optimized is not None and issubclass(type(value), optimized):  # disable() of a module (``return gm``)
        value = vars(value).get("_modules", {}).get("_orig_mod")
    if issubclass(type(value), graph_module_type):
        found[id(value)] = value
    elif type(value) is types.FunctionType and depth > 0:
        for cell in value.__closure__ or ():
            try:
                held = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            _graphs_in(held, graph_module_type, found, depth - 1, optimized)


def _is_autograd_function(cls: type) -> bool:
    autograd = sys.modules.get("torch.autograd")
    return autograd is not None and issubclass(cls, autograd.Function)


def _walked(module: str) -> bool:
    """Whether the objects of a class of ``module`` are looked into: torch's wrappers, not fx's graphs and nodes."""
    return module.startswith("torch.") and not module.startswith("torch.fx")
