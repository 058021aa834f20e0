"""Distinct input samples of functional calls, keyed by their full signature.

Two calls share a signature when every tensor at every position (nested lists/tuples/dicts included)
has the same shape, dtype, strides and device, and every other argument has the same value. The key
is built on the recorder's per-call path, so it is a plain tuple, cheap to hash.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from kernelscope.analyzer.samples import encode, tensor_bytes

Sample = tuple[tuple, dict]
_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_strided = torch.strided
_PLAIN = frozenset({int, bool, str, type(None), torch.dtype, torch.device})
_SCALARS = _PLAIN | {torch.layout, torch.memory_format}  # equal exactly when their values are
_SCALAR_TUPLE = object()


def _tensor_key(value: torch.Tensor) -> tuple:
    if value.layout is _strided:
        return (value.shape, value.dtype, value.stride(), value.device)
    return (value.shape, value.dtype, value.layout, value.device)


def signature_key(value: Any, known: dict | None = None) -> Any:
    """A hashable key that differs exactly when two arguments differ in signature.

    ``known``: ``{id(tensor): (tensor, key)}`` of tensors whose keys are already built (``SampleBook.remember``).
    """
    kind = type(value)
    if kind in _PLAIN:
        return (kind, value)
    if isinstance(value, _Tensor):
        if known:
            hit = known.get(id(value))
            if hit is not None and hit[0] is value:
                return hit[1]
        return _tensor_key(value)
    if kind is tuple or kind is list:
        return (kind, *[signature_key(v, known) for v in value])
    if kind is dict:
        return (dict, *[(k, signature_key(v, known)) for k, v in value.items()])
    if kind is float:
        return (float, "nan") if math.isnan(value) else (float, value)
    if kind is slice:  # x[a:b]; slices are unhashable before Python 3.12
        return (slice, signature_key(value.start), signature_key(value.stop), signature_key(value.step))
    if isinstance(value, (tuple, list)):  # torch.Size, named tuples
        return (kind, *[signature_key(v, known) for v in value])
    try:
        hash(value)
    except TypeError:
        return (kind, id(value))
    return (kind, value)


def call_key(args: tuple, kwargs: dict, persistent: dict) -> tuple:
    """A key of one call's ``(args, kwargs)`` that differs exactly when ``signature_key`` does, built flat
    and without recursion for the common arguments: this is the recorder's per-call path.

    Each argument adds one tuple, positional ones first, then the values of ``kwargs``; a call with
    keyword arguments ends in the marker ``dict`` and the tuple of their names, so a key reads back one
    way only. ``persistent`` maps ``id(tensor)`` to ``(tensor, key)`` for the observed modules' parameters
    and buffers (``SampleBook.remember``), whose keys are looked up instead of built.
    """
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
                    append(_tensor_key(value))
            elif kind in _SCALARS:
                append((kind, value))
            elif kind is float:  # dropout's p, norms' eps; every NaN is one value, as in signature_key
                append((float, value) if value == value else (float, "nan"))
            elif kind is tuple and _SCALARS.issuperset(types := tuple(map(type, value))):
                append((_SCALAR_TUPLE, value, types))  # conv's stride, padding, dilation
            else:
                append(signature_key(value, persistent))
    if kwargs:
        append(dict)
        append(tuple(kwargs))
    return tuple(key)


class SampleBook:
    """Per function: distinct samples in first-seen order, their call counts, live references."""

    def __init__(self) -> None:
        self.samples: dict[str, list[Sample]] = {}
        self.counts: dict[str, list[int]] = {}
        self.persistent: dict[int, tuple] = {}
        self._recorders: dict[str, Any] = {}
        self._forgets: list[Any] = []

    def remember(self, tensors: Any) -> None:
        """Key these tensors once, up front: the parameters and buffers of the observed modules, which keep
        their shapes during one recording (a buffer replaced by a new tensor is keyed as any other)."""
        for tensor in tensors:
            if isinstance(tensor, _Tensor):
                self.persistent[id(tensor)] = (tensor, _tensor_key(tensor))

    def recorder(self, function_name: str):
        """The function ``(args, kwargs) -> sample id`` that counts the calls of ``function_name``."""
        record = self._recorders.get(function_name)
        if record is not None:
            return record
        ids: dict[Any, int] = {}
        samples: list[Sample] = []
        counts: list[int] = []
        persistent = self.persistent

        def record(args: tuple, kwargs: dict) -> int:
            key = call_key(args, kwargs, persistent)
            sample_id = ids.get(key)
            if sample_id is not None:
                counts[sample_id] += 1
                return sample_id
            sample_id = ids[key] = len(samples)
            if not samples:  # functions that were never called have no entry
                self.samples[function_name], self.counts[function_name] = samples, counts
            samples.append((args, kwargs))
            counts.append(1)
            self.new_signature(function_name, sample_id, args, kwargs)
            return sample_id

        def forget() -> None:
            ids.clear()
            samples.clear()
            counts.clear()

        self._recorders[function_name] = record
        self._forgets.append(forget)
        return record

    def new_signature(self, function_name: str, sample_id: int, args: tuple, kwargs: dict) -> None:
        """Called once per distinct signature, after its first call is counted."""

    def function_data(self) -> dict[str, list[tuple[int, Sample]]]:
        """``{function: [(calls, (args, kwargs)), ...]}`` with the live arguments."""
        return {name: list(zip(self.counts[name], self.samples[name], strict=True)) for name in self.samples}

    def metadata(self) -> dict:
        """The torch-free store (samples.json): counts, tensor signatures, non-tensor values."""
        return {
            name: [
                {
                    "sample_id": sample_id,
                    "calls": self.counts[name][sample_id],
                    "tensor_bytes": tensor_bytes(sample),
                    "args": encode(sample[0], tensor_meta),
                    "kwargs": encode(sample[1], tensor_meta),
                }
                for sample_id, sample in enumerate(self.samples[name])
            ]
            for name in self.samples
        }

    def reset(self) -> None:
        """Forget every call and sample but keep the recorders, which the patched wrappers hold: a warm-up pass
        made with the scopes in place is not counted."""
        for forget in self._forgets:
            forget()
        self.samples = {}
        self.counts = {}

    def clear(self) -> None:
        """Forget everything, recorders and persistent keys included."""
        self.reset()
        self.persistent.clear()
        self._recorders.clear()
        self._forgets.clear()


def tensor_meta(value: Any) -> dict | None:
    if not isinstance(value, _Tensor):
        return None
    strided = value.layout is _strided
    return {
        "shape": list(value.shape),
        "dtype": str(value.dtype).removeprefix("torch."),
        "stride": list(value.stride()) if strided else None,
        "device": str(value.device),
        "nbytes": value.numel() * value.element_size(),
    }
