"""What the code of a model's classes reaches that no Python module's globals hold, for the scan of stored
references (recorder/stored_references.py): the namespace of a forward written by ``exec``, the modules its
functions import in their bodies (lazy imports), and the values of the Enum members it reads (``Act.GELU.value``)."""

from __future__ import annotations

import dis
import enum
import functools
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
        for name, names in _imports_in(function.__code__):
            resolved = _resolved(name, package)
            _add(found, resolved)
            for imported in names if resolved else ():
                _add(found, f"{resolved}.{imported}")  # a submodule: from . import acts
    return list(found.values())


@functools.lru_cache(maxsize=4096)  # a code's imports never change; reading them cost ~60 ms for a Llama's classes
def _imports_in(code: types.CodeType) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The modules ``code`` imports, named as written (``..acts``), each with the names imported from it."""
    imports: list[tuple[str, list[str]]] = []
    level: Any = 0
    for instruction in dis.get_instructions(code):
        if instruction.opname == "LOAD_CONST" and type(instruction.argval) is int:
            level = instruction.argval  # the level, loaded just before IMPORT_NAME's fromlist
        elif instruction.opname == "IMPORT_NAME":
            imports.append(("." * level + instruction.argval, []))
        elif instruction.opname == "IMPORT_FROM" and imports:
            imports[-1][1].append(instruction.argval)
    return tuple((name, tuple(names)) for name, names in imports)


def _resolved(name: str, package: Any) -> str | None:
    try:
        return importlib.util.resolve_name(name, package if type(package) is str else None)
    except (ImportError, ValueError):
        return None


def _add(found: dict, name: str | None) -> None:
    module = sys.modules.get(name) if name else None
    if type(module) is types.ModuleType and name != "torch" and not name.startswith("torch."):
        found[name] = module


def enum_sites(value: Any, items_sites: Any, originals: dict, wrappers: dict) -> list[tuple[Any, Any, Any]]:
    """The sites (stored_references.py) of the members of ``value`` where it is an Enum class, or of ``value`` itself
    where it is an Enum member: a member's value (``_value_``) may be a functional (``class Act(Enum): GELU =
    F.gelu``, ``RELU = partial(F.relu)``, ``SILU = enum.member(F.silu)``), which code reads as ``Act.GELU.value``
    at each call. The wrapper of a member's value is a key of its class's map of values too, so that ``Act(F.gelu)``
    (the wrapper while recorded) finds the member. Read from the class's ``__dict__``, without its metaclass's code.
    ``items_sites``: stored_references._items_sites."""
    kind = value if issubclass(type(value), enum.EnumMeta) else type(value)
    if not issubclass(type(kind), enum.EnumMeta):
        return []
    namespace = vars(kind)
    members = namespace.get("_member_map_")
    members = list(members.values()) if type(members) is dict and kind is value else [value]
    by_value = namespace.get("_value2member_map_")
    sites = []
    for member in members:
        attributes = getattr(member, "__dict__", None)
        if type(attributes) is not dict:
            continue
        found = items_sites(attributes, list(attributes.items()), originals, wrappers, "__builtins__")
        sites += found
        held = attributes.get("_value_")
        if type(by_value) is dict and any(key == "_value_" for _, key, _ in found) and id(held) in originals:
            sites.append((by_value, wrappers[id(held)], member))
    return sites
