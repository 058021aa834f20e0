"""Which ``__torch_function__`` handlers may recognize a function by identity (wrappers._dispatched).

While a handler runs, the namespaces that hold a patched function hold its original again, so that a handler
comparing ``func`` with the public name finds it as unrecorded. The namespaces are the process's: another of the
model's threads calling that function in that instant gets the original, unscoped. torch's own DeviceContext mode
(``torch.set_default_device``, ``with torch.device(...)``) is on around every call of a program that sets a default
device, and needs no such swap: it looks ``func`` up in a set of the originals it caches once, made here at import,
before any recording patches them. The recorder's own reads of a handled call's arguments run with the handlers
off (``read_unhandled``)."""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import _get_current_function_mode_stack
from torch.utils._device import DeviceContext, _device_constructors

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
