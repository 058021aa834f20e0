"""What samples.json says of a signature's inputs (``describe``): their tensors by shape, dtype, strides and device,
other values by their ``repr`` (tensors inside them shown by shape alone), read when its first call is keyed."""

from __future__ import annotations

from typing import Any

import torch
from kernelscope.analyzer.samples import encode, safe_repr, tensor_bytes

from .sample_keys import tensor_shape

_Tensor = torch.Tensor
_strided = torch.strided


def describe(args: tuple, kwargs: dict) -> dict:
    """A signature's entry in samples.json (less its id and count), made when its first call is keyed: its inputs
    as they were then, for a model may reshape them in place after the call (``h.t_()``)."""
    return {
        "tensor_bytes": tensor_bytes((args, kwargs)),
        "args": encode(args, tensor_meta, object_repr=repr_without_values),
        "kwargs": encode(kwargs, tensor_meta, object_repr=repr_without_values),
    }


def repr_without_values(value: Any) -> str:
    """safe_repr of an argument of no JSON type, its tensors shown by shape, dtype and device and its storages by
    their size and device: printing their values reads them off the device (a synchronization and a copy inside the
    recorded pass, device events that are not the model's: Mask R-CNN slices its masks by 0-dim CUDA tensors), and
    a large one's fill megabytes (a storage's repr prints every byte, one a line: ``Tensor.set_``'s argument)."""
    if type(value) in _PLAIN_REPRS:  # a slice's int bounds: nothing of theirs prints a tensor
        return repr(value)
    if type(value) is slice:
        return f"slice({', '.join(repr_without_values(v) for v in (value.start, value.stop, value.step))})"
    if issubclass(type(value), _Tensor):  # by type: isinstance also runs a __class__ property of the object's own
        return _tensor_text(value)
    if issubclass(type(value), _STORAGES):
        return _storage_text(value)
    own = [vars(kind)[name] for kind, name, _ in _SHORT]
    for kind, name, short in _SHORT:  # an object of the model's that prints some
        setattr(kind, name, short)
    try:
        return safe_repr(value)
    finally:
        for (kind, name, _), before in zip(_SHORT, own, strict=True):
            setattr(kind, name, before)


_PLAIN_REPRS = frozenset({type(None), bool, int, float, str})


def _tensor_text(value: Any, *_: Any, **__: Any) -> str:
    return f"tensor(shape={list(tensor_shape(value))}, dtype={value.dtype}, device={value.device})"


def _tensor_format(value: Any, spec: str) -> str:
    return _tensor_text(value)


def _storage_text(value: Any) -> str:
    if issubclass(type(value), _TypedStorage):
        return f"TypedStorage(dtype={value.dtype}, size={value.size()}, device={value.device})"
    return f"{type(value).__name__}(nbytes={value.nbytes()}, device={value.device})"


_StorageBase, _TypedStorage = torch.storage._StorageBase, torch.TypedStorage
_STORAGES = (_StorageBase, _TypedStorage)
# (class, method, its stand-in) of what prints values, replaced while the repr of an object holding some is made
_SHORT = [
    (_Tensor, "__repr__", _tensor_text),
    (_Tensor, "__format__", _tensor_format),
    (_StorageBase, "__repr__", _storage_text),  # UntypedStorage's (its __str__ is object's, which calls it)
    (_TypedStorage, "__repr__", _storage_text),
    (_TypedStorage, "__str__", _storage_text),
]


def tensor_meta(value: Any) -> dict | None:
    if not issubclass(type(value), _Tensor):
        return None
    strided = value.layout is _strided and not value.is_nested
    return {
        "shape": list(tensor_shape(value)),
        "dtype": str(value.dtype).removeprefix("torch."),
        "stride": list(value.stride()) if strided else None,
        "device": str(value.device),
        "nbytes": value.numel() * value.element_size(),
    }
