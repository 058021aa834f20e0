"""The signature key of a call's arguments, which decides which calls share a sample (SampleBook, samples.py).

Two calls share a signature when every tensor at every position (nested lists/tuples/dicts included)
has the same shape, dtype, strides and device, and every other argument has the same value: a numpy array,
made afresh in every pass like a tensor (``x[np.arange(n)]``), by its shape, dtype and strides; a scalar of
a subclass of int, float or str (numpy.float64, an IntEnum) by the plain value torch takes it for; an
unhashable object by its identity, and so is an object whose ``__eq__`` raises where the keying compares it (a hash
collision with another argument's key): a distinct, unkeyable value, which never makes the keying raise. The key is
built on the recorder's per-call path, so it is a plain tuple, cheap to hash.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import torch
from kernelscope.analyzer.rundir import container_items
from kernelscope.analyzer.samples import MAX_NESTING, plain_scalar, too_deep

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_strided = torch.strided
_PLAIN = frozenset({int, bool, str, type(None), torch.dtype, torch.device})
_SCALARS = _PLAIN | {torch.layout, torch.memory_format}  # equal exactly when their values are
_SCALAR_TUPLE = object()


def tensor_shape(value: torch.Tensor) -> tuple[int | None, ...]:
    """A tensor's sizes, None where a nested tensor's are ragged: a jagged one's are symbolic there (a new
    symbol for every tensor, so they would key every call apart); a strided one has no sizes of its own, only its
    components' (a size all of them share is not ragged)."""
    try:
        shape = value.shape
    except RuntimeError:
        return (value.size(0), *_component_sizes(value))
    sizes = tuple(size if type(size) is int else None for size in shape)
    if None in sizes and _tracing_state() is not None:  # torch.jit.trace's sizes are tensors: read untraced
        return untraced(tensor_shape, value)
    return sizes


_tracing_state = torch._C._get_tracing_state


def untraced(function: Any, *args: Any) -> Any:
    """``function(*args)`` with torch.jit's tracer paused, where the model traces (``torch.jit.trace`` in its
    forward): under it a tensor's sizes and ``numel()`` are tensors, which samples.json cannot hold, and reading
    them would record operators into the model's graph."""
    state = _tracing_state()
    if state is None:
        return function(*args)
    torch._C._set_tracing_state(None)
    try:
        return function(*args)
    finally:
        torch._C._set_tracing_state(state)


def _component_sizes(value: torch.Tensor) -> list[int | None]:
    """The sizes a strided nested tensor's components share, None where they differ."""
    try:
        sizes = value._nested_tensor_size().tolist()  # one row of sizes per component
    except (AttributeError, RuntimeError):
        return [None] * (value.dim() - 1)
    if not sizes:
        return [None] * (value.dim() - 1)
    return [column[0] if len(set(column)) == 1 else None for column in zip(*sizes, strict=True)]


def tensor_key(value: torch.Tensor) -> tuple:
    if value.layout is _strided and not value.is_nested:
        return (value.shape, value.dtype, value.stride(), value.device)
    return (tensor_shape(value), value.dtype, value.layout, value.device)


def signature_key(value: Any, known: dict | None = None, depth: int = 1, by_identity: bool = False) -> Any:
    """A hashable key that differs exactly when two arguments differ in signature, down to MAX_NESTING levels of
    containers: deeper ones (samples.json describes them by their type alone) are one signature, and a container
    that holds itself ends there instead of in a RecursionError.

    ``known``: ``{id(tensor): (tensor, key)}`` of tensors whose keys are already built (``SampleBook.remember``).
    ``by_identity``: objects other than plain values are keyed by their identity, so the key holds none of them.
    """
    kind = type(value)
    if kind in _PLAIN:
        return (kind, value)
    if issubclass(kind, _Tensor):  # by type: isinstance also runs a __class__ property of the object's own
        if known:
            hit = known.get(id(value))
            if hit is not None and hit[0] is value:
                return hit[1]
        return tensor_key(value)
    if depth > MAX_NESTING and issubclass(kind, (tuple, list, dict)):
        return (kind, too_deep(kind))
    if kind is tuple or kind is list:
        return (kind, *[signature_key(v, known, depth + 1, by_identity) for v in value])
    if kind is dict:
        if by_identity:  # its keys too, which may be objects of the model's own
            pairs = value.items()
            return (dict, *[tuple(signature_key(item, known, depth + 1, True) for item in pair) for pair in pairs])
        return (dict, *[(k, signature_key(v, known, depth + 1)) for k, v in value.items()])
    if kind is float:
        return (float, "nan") if math.isnan(value) else (float, value)
    if kind is slice:  # x[a:b]; slices are unhashable before Python 3.12
        bounds = (value.start, value.stop, value.step)
        return (slice, *[signature_key(bound, None, depth + 1, by_identity) for bound in bounds])
    if issubclass(kind, (tuple, list)):  # torch.Size, named tuples; read as torch reads them (container_items)
        return (kind, *[signature_key(v, known, depth + 1, by_identity) for v in container_items(value)])
    plain = plain_scalar(value)
    if plain is not value:  # numpy.float64, an IntEnum: the value torch takes, as samples.json writes it
        return signature_key(plain)
    numpy = sys.modules.get("numpy")
    if numpy is not None and issubclass(kind, numpy.ndarray):  # array-like, like a tensor: a new one every call
        return (kind, value.shape, value.dtype.str, value.strides)
    if by_identity:
        return (kind, id(value))
    try:
        hash(value)
    except Exception:  # noqa: BLE001 (unhashable, or a __hash__ of the model's own that raises)
        return (kind, id(value))
    return (kind, value)


def call_key(args: tuple, kwargs: dict, persistent: dict, by_identity: bool = False) -> tuple:
    """A key of one call's ``(args, kwargs)`` that differs exactly when ``signature_key`` does, built flat
    and without recursion for the common arguments: this is the recorder's per-call path.

    Each argument adds one tuple, positional ones first, then the values of ``kwargs``; a call with
    keyword arguments ends in the marker ``dict`` and the tuple of their names, so a key reads back one
    way only. ``persistent`` maps ``id(tensor)`` to ``(tensor, key)`` for the observed modules' parameters
    and buffers (``SampleBook.remember``), whose keys are looked up instead of built. ``by_identity``: as
    ``signature_key``'s.
    """
    if _tracing_state() is not None:  # under torch.jit.trace a shape's sizes are tensors (untraced)
        return untraced(call_key, args, kwargs, persistent, by_identity)
    key = []
    append = key.append
    for group in (args, kwargs.values()) if kwargs else (args,):
        for value in group:
            kind = type(value)
            if kind is _Tensor or kind is _Parameter:
                hit = persistent.get(id(value))
                if hit is not None and hit[0] is value:
                    append(hit[1])
                    continue
                try:
                    append((value.shape, value.dtype, value.stride(), value.device))
                except (RuntimeError, NotImplementedError):  # no strides: sparse, nested, mkldnn
                    append(tensor_key(value))
            elif kind in _SCALARS:
                append((kind, value))
            elif kind is float:  # dropout's p, norms' eps; every NaN is one value, as in signature_key
                append((float, value) if value == value else (float, "nan"))
            elif kind is tuple and _SCALARS.issuperset(types := tuple(map(type, value))):
                append((_SCALAR_TUPLE, value, types))  # conv's stride, padding, dilation
            else:
                append(signature_key(value, persistent, 1, by_identity))
    if kwargs:
        append(dict)
        append(tuple(kwargs))
    return tuple(key)


def across_passes(key: Any) -> Any:
    """``key`` (a call's, or a list or tuple of them) as another pass's keying of the same calls would build it: an
    argument keyed by its identity, an object equal only to itself, by its type alone. A program makes such objects
    anew in every pass (the cache of transformers' ``generate()``), so their keys never compare equal across passes,
    though the calls are the same."""
    kind = type(key)
    if kind is list:
        return [across_passes(k) for k in key]
    if kind is not tuple:
        return key
    if len(key) == 2 and isinstance(key[0], type) and _keyed_by_identity(key[0], key[1]):
        return (key[0],)
    return tuple(across_passes(k) for k in key)


def _keyed_by_identity(kind: type, value: Any) -> bool:
    """Whether ``(kind, value)`` is signature_key's key of an object by its identity: the object itself where its
    class compares by identity, or its ``id`` where it is unhashable."""
    if kind in _SCALARS or kind is float:
        return False
    if type(value) is kind:
        return kind.__eq__ is object.__eq__
    return type(value) is int


def holds_containers(args: tuple, kwargs: dict) -> bool:
    """Whether a call's arguments hold a list or a dict (in a tuple too), which the model may change after the call:
    DenseNet's ``torch.cat(features)``, then ``features.append``. Its kept sample and its calls held for keying
    after the pass copy them (``as_called``), so they read as the call saw them."""
    return any(_holds_containers(value, 1) for group in (args, kwargs.values()) for value in group)


def _holds_containers(value: Any, depth: int) -> bool:
    kind = type(value)
    if kind is list or kind is dict:
        return True
    return kind is tuple and depth < MAX_NESTING and any(_holds_containers(v, depth + 1) for v in value)


def as_called(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``(args, kwargs)`` with their lists and dicts copied (and the tuples that hold them), down to the depth
    the keys read: what a later change of the model's containers leaves as it was. Tensors and other objects are
    the same objects."""
    return _copied(args, 1), {k: _copied(v, 1) for k, v in kwargs.items()}


def _copied(value: Any, depth: int) -> Any:
    kind = type(value)
    if depth > MAX_NESTING or not (kind is list or kind is dict or kind is tuple):
        return value
    if kind is dict:
        return {k: _copied(v, depth + 1) for k, v in value.items()}
    items = [_copied(v, depth + 1) for v in value]
    if kind is list:
        return items
    return value if all(a is b for a, b in zip(items, value, strict=True)) else tuple(items)
