"""What the code of a model's classes reaches that no Python module's globals hold, for the scan of stored
references (recorder/stored_references.py): the namespace of a forward written by ``exec``, and the modules its
functions import in their bodies (lazy imports)."""

from __future__ import annotations

import dis
import importlib.util
import sys
import types
from collections.abc import Iterator
from typing import Any


def _functions(kind: type) -> Iterator[types.FunctionType]:
    for value in list(vars(kind).values()):
        function = value.__func__ if issubclass(type(value), (staticmethod, classmethod)) else value
        if type(function) is types.FunctionType:
            yield function


def code_namespaces(kind: type, seen: set[int]) -> Iterator[dict]:
    """The globals of the functions a model's class defines where they are no Python module's (code written by
    ``exec(source, namespace)``, whose ``from torch.nn.functional import gelu`` lands there), each once."""
    for function in _functions(kind):
        if id(function.__globals__) in seen:
            continue
        namespace = function.__globals__
        seen.add(id(namespace))
        module = sys.modules.get(namespace.get("__name__") if type(namespace.get("__name__")) is str else "")
        if module is None or getattr(module, "__dict__", None) is not namespace:
            yield namespace


def imported_modules(kind: type) -> list[types.ModuleType]:
    """The Python modules, not torch's, that the functions ``kind`` defines import by an import statement in their
    bodies (``import acts``, ``from .acts import ACT``, ``from . import acts``), as loaded now."""
    found: dict[str, types.ModuleType] = {}
    for function in _functions(kind):
        package = function.__globals__.get("__package__")
        level: Any = 0
        resolved = None
        for instruction in dis.get_instructions(function.__code__):
            if instruction.opname == "LOAD_CONST" and type(instruction.argval) is int:
                level = instruction.argval  # the level, loaded just before IMPORT_NAME's fromlist
            elif instruction.opname == "IMPORT_NAME":
                resolved = _resolved("." * level + instruction.argval, package)
                _add(found, resolved)
            elif instruction.opname == "IMPORT_FROM" and resolved:
                _add(found, f"{resolved}.{instruction.argval}")  # a submodule: from . import acts
    return list(found.values())


def _resolved(name: str, package: Any) -> str | None:
    try:
        return importlib.util.resolve_name(name, package if type(package) is str else None)
    except (ImportError, ValueError):
        return None


def _add(found: dict, name: str | None) -> None:
    module = sys.modules.get(name) if name else None
    if type(module) is types.ModuleType and name != "torch" and not name.startswith("torch."):
        found[name] = module
