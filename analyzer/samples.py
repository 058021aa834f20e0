"""The torch-free sample metadata (samples.json): encoding of call arguments, decoding, signatures.

Arguments are stored as JSON with tagged containers so that tuples, lists, dicts, torch.Size and
non-finite floats come back as they were; tensors are stored as their metadata (TensorMeta).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from .errors import BadInputError

SAMPLES_FORMAT = 1
_INT64 = 1 << 63


@dataclass(frozen=True)
class TensorMeta:
    """What the analyzer knows of a sample tensor without torch: its signature and size."""

    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...] | None
    device: str
    nbytes: int

    def __str__(self) -> str:
        text = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        if self.stride is not None and self.stride != contiguous_stride(self.shape):
            text += f"{{{','.join(map(str, self.stride))}}}"
        return f"{text}@{self.device}"


@dataclass(frozen=True)
class ObjectRepr:
    """A non-tensor, non-plain argument, kept as its type and repr."""

    type: str
    repr: str

    def __str__(self) -> str:
        return self.repr


def contiguous_stride(shape: tuple[int, ...]) -> tuple[int, ...]:
    stride, acc = [], 1
    for size in reversed(shape):
        stride.append(acc)
        acc *= max(size, 1)
    return tuple(reversed(stride))


def encode(value: Any, tensor: Callable[[Any], dict | None]) -> Any:
    """JSON-ready form of an argument; ``tensor(v)`` returns the tensor dict for tensors, else None."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if -_INT64 <= value < _INT64 else {"int": str(value)}
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    meta = tensor(value)
    if meta is not None:
        return {"tensor": meta}
    if isinstance(value, tuple):
        tag = "size" if type(value).__name__ == "Size" else "tuple"
        return {tag: [encode(v, tensor) for v in value]}
    if isinstance(value, list):
        return {"list": [encode(v, tensor) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[encode(k, tensor), encode(v, tensor)] for k, v in value.items()]}
    if isinstance(value, ObjectRepr):  # a decoded store encodes back to what it was read from
        return {"object": {"type": value.type, "repr": value.repr}}
    kind = type(value)
    return {"object": {"type": f"{kind.__module__}.{kind.__qualname__}", "repr": repr(value)}}


def tensor_meta_dict(value: Any) -> dict | None:
    """``encode``'s tensor callback for decoded samples: a TensorMeta as the store writes tensors."""
    if not isinstance(value, TensorMeta):
        return None
    stride = None if value.stride is None else list(value.stride)
    return {
        "shape": list(value.shape),
        "dtype": value.dtype,
        "stride": stride,
        "device": value.device,
        "nbytes": value.nbytes,
    }


def decode(value: Any) -> Any:
    """The inverse of ``encode``, with TensorMeta and ObjectRepr in place of tensors and objects."""
    if not isinstance(value, dict):
        return value
    ((tag, body),) = value.items()
    if tag == "tensor":
        stride = body.get("stride")
        return TensorMeta(
            tuple(body["shape"]),
            body["dtype"],
            None if stride is None else tuple(stride),
            body["device"],
            body["nbytes"],
        )
    if tag in ("tuple", "size"):
        return tuple(decode(v) for v in body)
    if tag == "list":
        return [decode(v) for v in body]
    if tag == "dict":
        return {_hashable(decode(k)): decode(v) for k, v in body}
    if tag == "float":
        return float(body)
    if tag == "int":
        return int(body)
    if tag == "object":
        return ObjectRepr(body["type"], body["repr"])
    raise ValueError(f"unknown sample value tag {tag!r}")


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def render(value: Any) -> str:
    """A compact one-line signature of decoded arguments."""
    if isinstance(value, tuple):
        return "(" + ", ".join(render(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(render(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={render(v)}" for k, v in value.items()) + "}"
    return str(value)


def tensor_bytes(value: Any) -> int:
    """Bytes of the tensors (live or TensorMeta) anywhere inside ``value``."""
    if isinstance(value, (tuple, list)):
        return sum(tensor_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    if isinstance(value, TensorMeta):
        return value.nbytes
    if hasattr(value, "element_size") and hasattr(value, "numel"):  # a torch.Tensor, duck-typed
        return value.numel() * value.element_size()
    return 0


def read_samples(path: str | os.PathLike) -> dict:
    """samples.json, checked: {function_name: [entry, ...]} with entries as written by the recorder."""
    path = Path(path)
    try:
        doc = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        raise BadInputError(path, "is not valid JSON") from None
    functions = doc.get("functions") if isinstance(doc, dict) else None
    if not isinstance(functions, dict) or not isinstance(doc.get("format_version"), int):
        raise BadInputError(path, "is not a kernelscope sample store (no format_version and functions)")
    for name, entries in functions.items():
        if not isinstance(entries, list) or not all(
            isinstance(e, dict) and {"sample_id", "calls", "args", "kwargs"} <= e.keys() for e in entries
        ):
            raise BadInputError(path, f"has malformed entries for function {name!r}")
    return functions


def function_data_from_store(functions: dict) -> dict[str, list[tuple[int, tuple[tuple, dict]]]]:
    """``{function: [(calls, (args, kwargs)), ...]}`` in sample-id order, tensors as TensorMeta."""
    return {
        name: [(e["calls"], (decode(e["args"]), decode(e["kwargs"]))) for e in sorted(entries, key=_sample_id)]
        for name, entries in functions.items()
    }


def _sample_id(entry: dict) -> int:
    return entry["sample_id"]


def samples_frame(function_data: dict) -> pd.DataFrame:
    """One row per distinct sample: function_name, sample_id, calls, tensor_bytes, signature."""
    rows = [
        (name, sample_id, calls, tensor_bytes(sample), render_call(sample))
        for name, entries in function_data.items()
        for sample_id, (calls, sample) in enumerate(entries)
    ]
    return pd.DataFrame(rows, columns=["function_name", "sample_id", "calls", "tensor_bytes", "signature"]).astype(
        {"function_name": object, "sample_id": "int64", "calls": "int64", "tensor_bytes": "int64", "signature": object}
    )


def render_call(sample: tuple[tuple, dict]) -> str:
    args, kwargs = sample
    parts = [render(a) for a in args] + [f"{k}={render(v)}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def sample_totals_frame(function_data: dict) -> pd.DataFrame:
    """Per function: calls, num_distinct_samples, tensor_bytes (the inputs of summary.sql)."""
    rows = [
        (name, sum(c for c, _ in entries), len(entries), sum(tensor_bytes(s) for _, s in entries))
        for name, entries in function_data.items()
    ]
    return pd.DataFrame(rows, columns=["function_name", "calls", "num_distinct_samples", "tensor_bytes"]).astype(
        {"function_name": object, "calls": "int64", "num_distinct_samples": "int64", "tensor_bytes": "int64"}
    )
