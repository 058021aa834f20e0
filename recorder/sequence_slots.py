"""The sequence slots of a class (CPython's ``sq_item``, ``sq_ass_item``) as they were before the recorder set and
removed its ``__getitem__``, ``__setitem__`` or ``__delitem__``, and those of its subclasses.

Setting one of those on a class in Python fills both its mapping slot and its sequence slot; removing it again
recomputes them from the bases, and where the C base defines only the mapping slot (``torch._C.TensorBase``) the
sequence slot stays a generic one that calls ``__getitem__``. A tensor then passes for a sequence (``PySequence_Check``)
and ``torch.tensor([t[0], t[1]])`` asks each 0-d element for its ``len()``, in the recording and for the rest of the
process. Python subscription reads the mapping slot first, so the sequence slot as it was is what the program saw.
"""

from __future__ import annotations

import ctypes
import sys
import weakref
from typing import Any

SEQUENCE_DUNDERS = frozenset({"__getitem__", "__setitem__", "__delitem__"})
_SLOT_IDS = (44, 39)  # typeslots.h: Py_sq_item, Py_sq_ass_item
_SLOT_WORDS = (3, 5)  # their places in PySequenceMethods: sq_length, sq_concat, sq_repeat, sq_item, _, sq_ass_item
_AS_SEQUENCE_WORD = 13  # tp_as_sequence's place in PyTypeObject, counted in pointers, after PyVarObject's three
_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made in Python, whose slots live in its own object


def _slot_reader() -> Any:
    if sys.implementation.name != "cpython" or not hasattr(ctypes, "pythonapi"):
        return None
    get_slot = ctypes.pythonapi.PyType_GetSlot
    get_slot.argtypes, get_slot.restype = (ctypes.py_object, ctypes.c_int), ctypes.c_void_p
    return get_slot


_GET_SLOT = _slot_reader()


_ADDRESSES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a class's slots stay where they are


def _slot_addresses(cls: type) -> tuple[int, ...] | None:
    """Where ``cls``'s two sequence slots are, where the layout read agrees with CPython's own ``PyType_GetSlot``."""
    if cls not in _ADDRESSES:
        _ADDRESSES[cls] = _found_addresses(cls)
    return _ADDRESSES[cls]


def _found_addresses(cls: type) -> tuple[int, ...] | None:
    if _GET_SLOT is None or not cls.__flags__ & _HEAP_TYPE:
        return None
    word = ctypes.sizeof(ctypes.c_void_p)
    table = ctypes.c_void_p.from_address(id(cls) + _AS_SEQUENCE_WORD * word).value
    if not table:
        return None
    addresses = tuple(table + place * word for place in _SLOT_WORDS)
    found = tuple(ctypes.c_void_p.from_address(address).value for address in addresses)
    return addresses if found == tuple(_GET_SLOT(cls, slot) for slot in _SLOT_IDS) else None


def _layout_checked() -> bool:
    """Whether the layout read finds a class's slots where they are not empty (a list subclass's), as PyType_GetSlot
    does: a class whose two slots are empty would agree with any address."""
    probe = type("SequenceProbe", (list,), {})
    return _found_addresses(probe) is not None and None not in (_GET_SLOT(probe, slot) for slot in _SLOT_IDS)


if _GET_SLOT is not None and not _layout_checked():  # another interpreter's layout: the slots are left alone
    _GET_SLOT = None


def _family(cls: type) -> list[type]:
    """``cls`` and its subclasses, at any depth, each once."""
    seen, order = {cls}, [cls]
    for member in order:
        for sub in type.__subclasses__(member):
            if sub not in seen:
                seen.add(sub)
                order.append(sub)
    return order


def setattr_keeping_slots(owner: Any, key: str, value: Any) -> None:
    """``setattr``, the sequence slots of ``owner`` and its subclasses as they were just before (a handler's moment
    with the original put back, recorder/identity_handlers.py)."""
    if key not in SEQUENCE_DUNDERS or not isinstance(owner, type):
        setattr(owner, key, value)
        return
    before = {cls: _read(cls) for cls in _family(owner)}
    setattr(owner, key, value)
    for cls, slots in before.items():
        _write(cls, slots)


class SequenceSlotsKept:
    """What the recorder's class patches put back besides the attributes: the sequence slots of each class it set a
    sequence dunder on, and of that class's subclasses, as they were before the first such patch."""

    def __init__(self) -> None:
        self.before: dict[type, dict[type, tuple[int | None, ...]]] = {}

    def setattr(self, owner: Any, key: str, value: Any) -> None:
        self._keeping(owner, key)
        setattr(owner, key, value)
        self._put_back(owner, key)

    def delattr(self, owner: Any, key: str) -> None:
        self._keeping(owner, key)
        delattr(owner, key)
        self._put_back(owner, key)

    def set_many(self, owner: type, values: dict[str, Any], missing: Any) -> None:
        """``setattr`` of each of ``values`` on the class ``owner`` in order, ``delattr`` where the value is
        ``missing``; the slots kept as ``setattr`` keeps them, looked after only for the sequence dunders (a call per
        attribute cost a recording ~0.5 ms over torch.Tensor's ~560, set and put back)."""
        for key, value in values.items():
            if key in SEQUENCE_DUNDERS and value is missing:
                self.delattr(owner, key)
            elif key in SEQUENCE_DUNDERS:
                self.setattr(owner, key, value)
            elif value is missing:
                delattr(owner, key)
            else:
                setattr(owner, key, value)

    def _keeping(self, owner: Any, key: str) -> None:
        if key in SEQUENCE_DUNDERS and isinstance(owner, type) and owner not in self.before:
            self.before[owner] = {cls: _read(cls) for cls in _family(owner)}

    def _put_back(self, owner: Any, key: str) -> None:
        saved = self.before.get(owner) if key in SEQUENCE_DUNDERS else None
        if saved is None:
            return
        for cls in _family(owner):
            # a class made while patched gets what its nearest class from before has, as if made unpatched
            _write(cls, saved.get(cls) or _from_nearest(cls, saved))


def _read(cls: type) -> tuple[int | None, ...] | None:
    addresses = _slot_addresses(cls)
    return None if addresses is None else tuple(ctypes.c_void_p.from_address(a).value for a in addresses)


def _write(cls: type, slots: tuple[int | None, ...] | None) -> None:
    addresses = _slot_addresses(cls)
    if slots is None or addresses is None:
        return
    for address, value in zip(addresses, slots, strict=True):
        ctypes.c_void_p.from_address(address).value = value


def _from_nearest(cls: type, saved: dict) -> tuple[int | None, ...] | None:
    """The slots of the nearest class in ``cls``'s MRO that was there before, unless a class on the way (``cls``
    itself included) defines a sequence dunder of its own, whose slots are its own."""
    for base in cls.__mro__:
        if base in saved:
            return saved[base]
        if SEQUENCE_DUNDERS & vars(base).keys():
            return None
    return None
