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


def _tensor_key(value: torch.Tensor) -> tuple:
    if value.layout is _strided:
        return (value.shape, value.dtype, value.stride(), value.device)
    return (value.shape, value.dtype, value.layout, value.device)


def signature_key(value: Any, parameters: dict | None = None) -> Any:
    """A hashable key that differs exactly when two arguments differ in signature.

    ``parameters`` caches the keys of ``nn.Parameter`` arguments by identity (weights are passed to
    every call and do not change shape during a recording), which saves most of the key's cost for
    linear, conv and norm calls.
    """
    kind = type(value)
    if kind is _Tensor:
        return _tensor_key(value)
    if kind in _PLAIN:
        return (kind, value)
    if kind is _Parameter and parameters is not None:
        hit = parameters.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        key = _tensor_key(value)
        parameters[id(value)] = (value, key)
        return key
    if isinstance(value, _Tensor):
        return _tensor_key(value)
    if kind is tuple or kind is list:
        return (kind, *[signature_key(v, parameters) for v in value])
    if kind is dict:
        return (dict, *[(k, signature_key(v, parameters)) for k, v in value.items()])
    if kind is float:
        return (float, "nan") if math.isnan(value) else (float, value)
    if kind is slice:  # x[a:b]; slices are unhashable before Python 3.12
        return (slice, signature_key(value.start), signature_key(value.stop), signature_key(value.step))
    if isinstance(value, (tuple, list)):  # torch.Size, named tuples
        return (kind, *[signature_key(v, parameters) for v in value])
    try:
        hash(value)
    except TypeError:
        return (kind, id(value))
    return (kind, value)


class SampleBook:
    """Per function: distinct samples in first-seen order, their call counts, live references."""

    def __init__(self) -> None:
        self.ids: dict[str, dict[Any, int]] = {}
        self.samples: dict[str, list[Sample]] = {}
        self.counts: dict[str, list[int]] = {}
        self.parameters: dict[int, tuple] = {}

    def record(self, function_name: str, args: tuple, kwargs: dict) -> int:
        """Count one call; return the sample id of its signature (its index in first-seen order)."""
        parameters = self.parameters
        key = signature_key(args, parameters)
        if kwargs:
            key = (key, signature_key(kwargs, parameters))
        ids = self.ids.get(function_name)
        if ids is None:
            ids = self.ids[function_name] = {}
            self.samples[function_name] = []
            self.counts[function_name] = []
        sample_id = ids.get(key)
        if sample_id is None:
            sample_id = ids[key] = len(ids)
            self.samples[function_name].append((args, kwargs))
            self.counts[function_name].append(1)
        else:
            self.counts[function_name][sample_id] += 1
        return sample_id

    def function_data(self) -> dict[str, list[tuple[int, Sample]]]:
        """``{function: [(calls, (args, kwargs)), ...]}`` with the live arguments."""
        return {name: list(zip(self.counts[name], self.samples[name], strict=True)) for name in self.samples}

    def total_bytes(self) -> int:
        return sum(tensor_bytes(s) for samples in self.samples.values() for s in samples)

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

    def clear(self) -> None:
        self.parameters.clear()
        self.ids.clear()
        self.samples.clear()
        self.counts.clear()


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
