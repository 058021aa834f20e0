"""What a ``__torch_function__`` handler of a scoped call is handed and finds (``dispatched``), and which handlers may
recognize a function by identity.

While a handler runs, the namespaces and classes that hold a patched function hold its original again, so that torch
hands the handler the original and a handler comparing ``func`` with the public name finds it as unrecorded. The
namespaces are the process's: another of the model's threads calling that function in that instant gets the
original, unscoped. torch's own DeviceContext mode
(``torch.set_default_device``, ``with torch.device(...)``) is on around every call of a program that sets a default
device, and needs no such swap: it looks ``func`` up in a set of the originals it caches once, made here at import,
before any recording patches them. The recorder's own reads of a handled call's arguments run with the handlers
off (``read_unhandled``)."""

from __future__ import annotations

import types
from threading import get_ident
from typing import Any

import torch
from torch.overrides import _get_current_function_mode_stack
from torch.utils._device import DeviceContext, _device_constructors

from .sequence_slots import setattr_keeping_slots

_device_constructors()  # cached with the originals: a first call while recorded would cache the wrappers
_NO_HANDLER = (torch.Tensor.__torch_function__.__func__, torch._C._disabled_torch_function_impl)


def may_compare_by_identity(args: tuple, kwargs: dict) -> bool:
    """Whether a handler of this call may compare ``func`` with a public name: any mode but DeviceContext, or an
    argument (or a tensor in a list or tuple argument) whose type overrides ``__torch_function__``."""
    if any(type(mode) is not DeviceContext for mode in _get_current_function_mode_stack()):
        return True
    return any(_has_handler(value) for value in _one_level_down((*args, *kwargs.values())))


def _has_handler(value: Any) -> bool:
    handler = getattr(type(value), "__torch_function__", None)
    return handler is not None and getattr(handler, "__func__", handler) not in _NO_HANDLER


def _one_level_down(values: tuple) -> Any:
    """The values, a list's or tuple's items in its place, read as torch reads them (a subclass's own ``__iter__``
    may raise; ``isinstance`` would ask a ``__class__`` of the object's own, which may too), by C code alone: this
    runs inside compiled regions, where torch refuses a Python frame dynamo has not seen (compiled.recorder_codes
    marks this package's, not the analyzer's ``container_items``)."""
    for value in values:
        kind = type(value)
        if issubclass(kind, tuple):
            yield from tuple.__iter__(value)
        elif issubclass(kind, list):
            yield from list.__iter__(value)
        else:
            yield value


def read_unhandled(record: Any, args: tuple, kwargs: dict) -> Any:
    """``record(args, kwargs)`` (a call's sample) for a call a ``__torch_function__`` handles, with handlers off: the
    recorder's reads of its arguments (shapes, strides, storages) would reach a mode of the model's as calls of the
    model's, which unrecorded it never sees."""
    with torch._C.DisableTorchFunction():
        return record(args, kwargs)


# id(wrapper) -> [(a Python module's namespace or a class, attribute, the original there, the wrapper put there)]: the
# places a patch plan puts the wrapper, and those whose function torch hands the handlers of its call (handler_sites)
_SITES: dict[int, list[tuple[Any, str, Any, Any]]] = {}


def dispatched(function: Any, wrapper: Any, args: tuple, kwargs: dict, calling_back: set[int]) -> Any:
    """``function``'s call where a ``__torch_function__`` (a mode's, a tensor subclass's) handles it: the handler calls
    the public function back, patched, so the same wrapper, and that call is this one's work, not a second call. The
    wrapper lets it through unscoped while this thread is in ``calling_back``.

    torch hands a handler the function it finds at the call's public name (a Python function's module global, a
    Tensor method looked up on ``torch.Tensor`` by its binding's name: ``add`` for ``x + y``), which handlers compare
    with that name (``func is torch.nn.functional.scaled_dot_product_attention`` in torch's own CausalBias), look up
    in sets or dicts they cached of the originals (``torch.device``'s constructors) or name
    (``torch.overrides.resolve_name``): while the handler runs, the Python modules and classes that hold the wrapper
    (and the function torch hands over) hold the original again, so that every such look-up finds it, as it would
    unrecorded; not where torch's DeviceContext is the only handler, which a default device puts around every call."""
    thread = get_ident()
    calling_back.add(thread)
    sites = _SITES.get(id(wrapper), ()) if may_compare_by_identity(args, kwargs) else ()
    put_back = [site for site in sites if _held_at(site) is site[3]]
    for owner, attribute, original, _wrapper in put_back:
        _put(owner, attribute, original)
    try:
        return function(*args, **kwargs)
    finally:
        for owner, attribute, _original, placed in put_back:
            _put(owner, attribute, placed)
        calling_back.discard(thread)


def _held_at(site: tuple) -> Any:
    owner, attribute = site[0], site[1]
    return (owner if type(owner) is dict else vars(owner)).get(attribute)


def _put(owner: Any, attribute: str, value: Any) -> None:
    if type(owner) is dict:
        owner[attribute] = value
    else:  # a class (torch.Tensor), whose namespace only setattr writes, and whose __getitem__ changes its slots
        setattr_keeping_slots(owner, attribute, value)


def handler_sites(
    groups: list[tuple[Any, dict[str, Any]]], originals: dict[int, Any], wrappers: dict[int, Any]
) -> None:
    """The sites of a patch plan's wrappers (``groups``: ``(owner, {attribute: wrapper})``; ``originals``, ``wrappers``:
    ``id(original)`` -> each): each wrapper's own places in Python modules and classes, and for a Tensor operator
    whose handler torch hands another method (``__add__``, ``__radd__``: ``Tensor.add``), that method's place."""
    original_of = {id(wrapper): originals[key] for key, wrapper in wrappers.items()}
    sites: dict[int, list[tuple[Any, str, Any, Any]]] = {}
    for owner, values in groups:
        if not isinstance(owner, (types.ModuleType, type)):
            continue
        place = vars(owner) if isinstance(owner, types.ModuleType) else owner  # a module's is written as a dict
        for attribute, wrapper in values.items():
            sites.setdefault(id(wrapper), []).append((place, attribute, original_of[id(wrapper)], wrapper))
        if isinstance(owner, type) and issubclass(owner, torch.Tensor):
            for attribute, handed in _handed_names(values, original_of).items():
                wrapper = values[attribute]
                sites[id(wrapper)].append((owner, handed, original_of[id(values[handed])], values[handed]))
    _SITES.update(sites)


class _Handed(Exception):  # noqa: N818 - not an error: what a probe's handler was handed
    pass


class _Probe(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise _Handed(func)


_HANDED: dict[str, str | None] = {}  # a Tensor operator's attribute -> the attribute of the function torch hands over


def _handed_names(values: dict[str, Any], original_of: dict[int, Any]) -> dict[str, str]:
    """``{operator: method}`` for each dunder of ``values`` whose handler torch hands another patched method: read once
    a process by calling the original on a tensor whose handler raises what it was handed."""
    probe, found = torch.empty(1).as_subclass(_Probe), {}
    for attribute, wrapper in values.items():
        if not (attribute.startswith("__") and attribute.endswith("__")):
            continue
        if attribute not in _HANDED:
            _HANDED[attribute] = _handed_name(original_of[id(wrapper)], probe)
        handed = _HANDED[attribute]
        if handed is not None and handed != attribute and handed in values:
            found[attribute] = handed
    return found


def _handed_name(function: Any, probe: torch.Tensor) -> str | None:
    for args in ((probe,), (probe, probe), (probe, 0, probe)):
        try:
            function(*args)
        except _Handed as handed:
            return getattr(handed.args[0], "__name__", None)
        except Exception:  # noqa: BLE001, S112 - another arity: the next is tried
            continue
    return None
