"""The places a stored reference is held that are not a dict's items, each read and written as one (``get(key)``,
``owner[key] = value``) so that a recording patches and puts them back as it does dicts (instrument.py's _Patches):
a list's items or a function's positional defaults, a class's attributes, a closure's cell, a torch.fx node's target,
an object's ``__slots__`` (recorder/stored_references.py)."""

from __future__ import annotations

import types
from typing import Any


class Slots:
    """A list's items or a function's positional defaults, read and written by position (as a dict's items)."""

    def __init__(self, target: Any, defaults_of: bool = False) -> None:
        self.target, self.defaults_of = target, defaults_of

    def _values(self) -> Any:
        return (self.target.__defaults__ or ()) if self.defaults_of else self.target

    def get(self, key: int, default: Any = None) -> Any:
        values = self._values()
        return values[key] if 0 <= key < len(values) else default

    def __setitem__(self, key: int, value: Any) -> None:
        if self.defaults_of:
            values = list(self.target.__defaults__)
            values[key] = value
            self.target.__defaults__ = tuple(values)
        else:
            self.target[key] = value


class Attributes(Slots):
    """A class's attributes, read from its ``__dict__`` and written by ``setattr`` (a class's ``__dict__`` is
    read-only)."""

    def get(self, key: str, default: Any = None) -> Any:
        return vars(self.target).get(key, default)

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self.target, key, value)


class Cell(Slots):
    """A closure's cell (its one slot, key 0), as a function made by another holds a functional it closed over."""

    def get(self, key: int, default: Any = None) -> Any:
        try:
            return self.target.cell_contents
        except ValueError:  # an empty cell
            return default

    def __setitem__(self, key: int, value: Any) -> None:
        self.target.cell_contents = value


class NodeTarget(Slots):
    """The function a torch.fx graph's ``call_function`` node calls (its one slot, key 0): ``torch.fx.Interpreter``
    (``ShapeProp``, an interpreter of the model's own) calls it, captured when the graph was traced."""

    def get(self, key: int, default: Any = None) -> Any:
        return self.target.target

    def __setitem__(self, key: int, value: Any) -> None:
        self.target.target = value


class SlotAttribute(Slots):
    """An attribute of an object without a ``__dict__``, held in a slot of its class (``__slots__``, a dataclass made
    with ``slots=True``: a config object holding ``act=F.gelu``), read and written through the slot's own descriptor,
    which a frozen dataclass's ``__setattr__`` does not stop. ``target``: (the object, the slot's descriptor)."""

    def get(self, key: str, default: Any = None) -> Any:
        holder, slot = self.target
        try:
            return slot.__get__(holder, type(holder))
        except AttributeError:  # an empty slot
            return default

    def __setitem__(self, key: str, value: Any) -> None:
        holder, slot = self.target
        slot.__set__(holder, value)


def slot_attributes(value: Any) -> list[tuple[str, Any]]:
    """``(name, descriptor)`` of each slot of ``value``'s classes that holds a value, read from the classes'
    ``__dict__`` (none where ``value`` has a ``__dict__``, whose attributes are read as such)."""
    found = []
    for kind in type(value).__mro__:
        names = vars(kind).get("__slots__", ())
        for name in (names,) if type(names) is str else names if type(names) in (tuple, list) else ():
            slot = vars(kind).get(name)  # absent where the name was mangled (``__act``)
            if type(slot) is types.MemberDescriptorType:
                found.append((name, slot))
    return found


class FunctionCode(Slots):
    """A function's code (its one slot, key 0): what every holder of the function runs, a bound method made before
    the recording included (recorder/graph_code.py)."""

    def get(self, key: int, default: Any = None) -> Any:
        return self.target.__code__

    def __setitem__(self, key: int, value: Any) -> None:
        self.target.__code__ = value
