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
_strided = torch.strided


def signature_key(value: Any) -> Any:
    """A hashable key that differs exactly when two arguments differ in signature."""
    kind = type(value)
    if kind is _Tensor or isinstance(value, _Tensor):
        if value.layout is _strided:
            return (kind, value.shape, value.dtype, value.stride(), value.device)
        return (kind, value.shape, value.dtype, value.layout, value.device)
    if kind is tuple or kind is list:
        return (kind, *map(signature_key, value))
    if kind is dict:
        return (dict, *((k, signature_key(v)) for k, v in value.items()))
    if kind is float and math.isnan(value):
        return (float, "nan")
    if isinstance(value, (tuple, list)):  # torch.Size, named tuples
        return (kind, *map(signature_key, value))
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

    def record(self, function_name: str, args: tuple, kwargs: dict) -> int:
        """Count one call; return the sample id of its signature (its index in first-seen order)."""
        key = (signature_key(args), signature_key(kwargs)) if kwargs else signature_key(args)
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
