"""The torch-free sample metadata (samples.json): encoding of call arguments, decoding, signatures.

Arguments are stored as JSON with tagged containers so that tuples, lists, dicts, torch.Size and
non-finite floats come back as they were; tensors are stored as their metadata (TensorMeta).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from .errors import BadInputError, json_fault
from .json_text import BOM
from .rundir import container_items, json_text, read_at_most

SAMPLES_FORMAT = 1
# containers nested in a sample's arguments, args and kwargs themselves the first level: encoded, a dict is 3 JSON
# levels, and orjson writes at most 255. The recorder writes deeper containers as a summary (encode), and keeps no
# tensors of such a sample in samples.pt, so that the analyzer reads every sample it writes and refuses the rest.
MAX_NESTING = 64
_INT64 = 1 << 63
SAMPLES_MEMORY_SHARE = 8  # samples.json may take an eighth of the machine's memory (samples_limit_bytes)
MAX_COUNT = _INT64 - 1  # calls and tensor bytes, and their sums per function: BIGINT columns (samples, summary)


@dataclass(frozen=True)
class TensorMeta:
    """What the analyzer knows of a sample tensor without torch: its signature and size."""

    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...] | None
    device: str
    nbytes: int

    @classmethod
    def from_json(cls, body: dict) -> TensorMeta:
        """From the ``{"tensor": ...}`` body of samples.json (lists become tuples)."""
        stride = body.get("stride")
        return cls(
            tuple(body["shape"]),
            body["dtype"],
            None if stride is None else tuple(stride),
            body["device"],
            body["nbytes"],
        )

    def to_json(self) -> dict:
        """The ``{"tensor": ...}`` body of samples.json (what ``decode`` reads back)."""
        stride = None if self.stride is None else list(self.stride)
        return {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "stride": stride,
            "device": self.device,
            "nbytes": self.nbytes,
        }

    def __str__(self) -> str:
        text = f"{self.dtype}[{','.join('*' if size is None else str(size) for size in self.shape)}]"
        if self.stride is not None and (None in self.shape or self.stride != contiguous_stride(self.shape)):
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


def encode(
    value: Any,
    tensor: Callable[[Any], dict | None] = lambda value: None,
    depth: int = 1,
    object_repr: Callable[[Any], str] | None = None,
) -> Any:
    """JSON-ready form of an argument; ``tensor(v)`` returns the tensor dict for tensors, else None (the
    default, for decoded samples, whose tensors are TensorMeta); ``object_repr`` writes any other object's repr
    (safe_repr by default). A container nested deeper than MAX_NESTING (``depth`` counts the containers around
    ``value``, itself included) is written as an object of its type whose repr says so, which decode reads
    back."""
    value = plain_scalar(value)
    kind = type(value)  # kinds by type alone: isinstance also runs a __class__ property of the object's own
    if value is None or kind is bool:
        return value
    if kind is str:  # a lone surrogate (a file name os.fsdecode'd) has no UTF-8: JSON cannot hold it
        return value if value.isascii() or _utf8(value) else {"object": {"type": "builtins.str", "repr": ascii(value)}}
    if kind is int:
        return value if -_INT64 <= value < _INT64 else {"int": str(value)}
    if kind is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if kind is TensorMeta:  # a tensor known by its metadata only (not kept, or read back)
        return {"tensor": value.to_json()}
    meta = tensor(value)
    if meta is not None:
        return {"tensor": meta}
    if issubclass(kind, (tuple, list, dict)) and depth > MAX_NESTING:
        return {"object": {"type": f"{kind.__module__}.{kind.__qualname__}", "repr": too_deep(kind)}}
    items = container_items(value)  # read without a subclass's own methods, which may raise or never end
    if issubclass(kind, tuple):
        tag = "size" if kind.__name__ == "Size" else "tuple"
        return {tag: [encode(v, tensor, depth + 1, object_repr) for v in items]}
    if issubclass(kind, list):
        return {"list": [encode(v, tensor, depth + 1, object_repr) for v in items]}
    if issubclass(kind, dict):
        return {"dict": [[encode(k, tensor, depth + 1, object_repr), encode(v, tensor, depth + 1, object_repr)]
                         for k, v in items]}  # fmt: skip
    if kind is ObjectRepr:  # a decoded store encodes back to what it was read from
        return {"object": {"type": value.type, "repr": value.repr}}
    text = (object_repr or safe_repr)(value)
    text = text if text.isascii() or _utf8(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")
    return {"object": {"type": f"{kind.__module__}.{kind.__qualname__}", "repr": text}}


_PLAIN_SCALARS = (bool, int, float, str)


def _utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def plain_scalar(value: Any) -> Any:
    """The plain int, float or str that a value of a subclass of one stands for (numpy.float64, an IntEnum, a str
    Enum: what torch takes it for), read without calling the subclass's own methods; any other value as it is.
    JSON and ``torch.load(weights_only=True)`` take only the plain types."""
    kind = type(value)
    if kind in _PLAIN_SCALARS or not issubclass(kind, _PLAIN_SCALARS):  # by type: no __class__ property is run
        return value
    if issubclass(kind, int):  # bool has no subclasses
        return int.__int__(value)
    if issubclass(kind, float):
        return float.__float__(value)
    return str.__str__(value)


def safe_repr(value: Any) -> str:
    """``repr(value)``, or a description of its type where its ``__repr__`` raises."""
    try:
        return repr(value)
    except Exception as exc:  # noqa: BLE001 (the model's own objects may raise anything)
        kind = type(value)
        return f"<{kind.__module__}.{kind.__qualname__} object (its repr raised {type(exc).__name__})>"


def too_deep(kind: type) -> str:
    """The repr a container nested deeper than MAX_NESTING is written with."""
    return f"<{kind.__qualname__} nested deeper than {MAX_NESTING} levels>"


def decode(value: Any, depth: int = 1) -> Any:
    """The inverse of ``encode``, with TensorMeta and ObjectRepr in place of tensors and objects; a value nested
    deeper than MAX_NESTING containers is refused (ValueError), so that nothing after it recurses too deep."""
    if not isinstance(value, dict):
        return value
    if len(value) != 1:
        raise ValueError(f"a tagged value has one key, not {len(value)}")
    ((tag, body),) = value.items()
    if tag not in _BODIES:
        raise ValueError(f"unknown sample value tag {tag!r}")
    if not isinstance(body, _BODIES[tag]):
        raise ValueError(f"a value tagged {tag!r} holds a JSON {_json_type(body)}, not {_JSON_TYPES[_BODIES[tag]]}")
    if tag == "tensor":
        stride = body.get("stride")
        if not (
            _sizes(body["shape"])
            and (stride is None or _ints(stride))
            and isinstance(body["dtype"], str)
            and isinstance(body["device"], str)
            and type(body["nbytes"]) is int
            and 0 <= body["nbytes"] <= MAX_COUNT
        ):
            raise ValueError(
                f"a tensor needs integer lists shape (sizes from 0 to {MAX_COUNT}, null for a ragged size) and stride,"
                f" strings dtype and device, nbytes from 0 to {MAX_COUNT}"
            )
        return TensorMeta.from_json(body)
    if tag in ("tuple", "size", "list", "dict") and depth > MAX_NESTING:
        raise ValueError(f"nested deeper than {MAX_NESTING} levels")
    if tag in ("tuple", "size"):
        return tuple(decode(v, depth + 1) for v in body)
    if tag == "list":
        return [decode(v, depth + 1) for v in body]
    if tag == "dict":
        return {_hashable(decode(k, depth + 1)): decode(v, depth + 1) for k, v in body}
    if tag in ("float", "int"):
        try:
            return float(body) if tag == "float" else int(body)
        except ValueError:  # Python's message quotes all of the text, and of a long int advises set_int_max_str_digits
            limit = f" of at most {sys.get_int_max_str_digits()} digits" if tag == "int" else ""
            raise ValueError(f"a value tagged {tag!r} holds {json_text(body)}, not a number{limit}") from None
    if not (isinstance(body["type"], str) and isinstance(body["repr"], str)):  # tag "object"
        raise ValueError("an object needs strings type and repr")
    return ObjectRepr(body["type"], body["repr"])


# the JSON type of each tag's body, as encode writes it
_BODIES = {
    "tensor": dict, "tuple": list, "size": list, "list": list, "dict": list, "float": str, "int": str, "object": dict
}  # fmt: skip
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string"}


def _json_type(value: Any) -> str:
    kinds = ((bool, "boolean"), (int, "number"), (float, "number"), (str, "string"), (list, "array"), (dict, "object"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "null")


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(type(v) is int for v in value)


def _sizes(value: Any) -> bool:
    """A shape: sizes from 0 to MAX_COUNT (a size of -1 is no tensor's), null where a nested tensor's is ragged."""
    return isinstance(value, list) and all(v is None or (type(v) is int and 0 <= v <= MAX_COUNT) for v in value)


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def render(value: Any, depth: int = 1) -> str:
    """A compact one-line signature of decoded arguments (containers past MAX_NESTING by their type)."""
    if isinstance(value, (tuple, list, dict)) and depth > MAX_NESTING:
        return too_deep(type(value))
    if isinstance(value, tuple):
        return "(" + ", ".join(render(v, depth + 1) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(render(v, depth + 1) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={render(v, depth + 1)}" for k, v in value.items()) + "}"
    return str(value)


def tensor_bytes(value: Any, depth: int = 1) -> int:
    """Bytes of the tensors (live or TensorMeta) inside ``value``, down to MAX_NESTING levels of containers (no
    sample's tensors are kept below that)."""
    kind = type(value)  # by type: isinstance also runs a __class__ property of the object's own
    if issubclass(kind, (tuple, list, dict)) and depth > MAX_NESTING:
        return 0
    if issubclass(kind, (tuple, list)):
        return sum(tensor_bytes(v, depth + 1) for v in container_items(value))
    if issubclass(kind, dict):
        return sum(tensor_bytes(v, depth + 1) for _key, v in container_items(value))
    if kind is TensorMeta:
        return value.nbytes
    if not issubclass(kind, type) and hasattr(kind, "element_size") and hasattr(kind, "numel"):
        return value.numel() * value.element_size()  # a torch.Tensor, duck-typed (a tensor class is an argument too)
    return 0


def read_samples(path: str | os.PathLike) -> dict:
    """samples.json, checked: {function_name: [entry, ...]} with entries as written by the recorder."""
    path = Path(path)
    try:
        data = read_at_most(path, samples_limit_bytes(), "a sample store")
    except OSError as exc:  # permission denied, or an input/output error (a symbolic link to /proc/self/mem)
        raise BadInputError(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        doc = orjson.loads(data.removeprefix(BOM))  # an editor's byte order mark, as in a trace
    except orjson.JSONDecodeError as exc:
        raise BadInputError(path, f"is not valid JSON ({json_fault(data, exc)})") from None
    functions = doc.get("functions") if isinstance(doc, dict) else None
    if not isinstance(functions, dict) or type(doc.get("format_version")) is not int:
        raise BadInputError(path, "is not a kernelscope sample store (no format_version and functions)")
    if doc["format_version"] < 1:
        raise BadInputError(path, f"has format version {doc['format_version']}, which no kernelscope writes")
    if doc["format_version"] > SAMPLES_FORMAT:
        raise BadInputError(
            path, f"has format version {doc['format_version']}, newer than this kernelscope reads ({SAMPLES_FORMAT})"
        )
    for name, entries in functions.items():
        if not isinstance(entries, list) or not all(
            isinstance(e, dict) and {"sample_id", "calls", "args", "kwargs"} <= e.keys() for e in entries
        ):
            raise BadInputError(path, f"has malformed entries for function {name!r}")
        ids = [e["sample_id"] for e in entries]
        if not all(type(i) is int for i in ids) or sorted(ids) != list(range(len(ids))):
            raise BadInputError(path, f"has sample ids of function {name!r} that are not 0, 1, 2… each once")
        if not all(type(e["calls"]) is int and e["calls"] >= 1 for e in entries):
            raise BadInputError(path, f"has a call count of function {name!r} that is not a positive integer")
    return functions


def samples_limit_bytes() -> int:
    """The most bytes of samples.json read: an eighth of the machine's memory (its objects take several times its
    JSON), at least 256 MiB; 2 GiB where the memory is unknown."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 2 << 30
    return max(memory // SAMPLES_MEMORY_SHARE, 256 << 20)


def function_data_from_store(
    functions: dict, path: str | os.PathLike | None = None
) -> dict[str, list[tuple[int, tuple[tuple, dict]]]]:
    """``{function: [(calls, (args, kwargs)), ...]}`` in sample-id order, tensors as TensorMeta.

    ``functions`` comes from read_samples; a value that does not decode is bad input of ``path``."""
    data = {}
    for name, entries in functions.items():
        data[name] = []
        for entry in sorted(entries, key=_sample_id):
            try:
                args, kwargs = decode(entry["args"]), decode(entry["kwargs"])
                if not isinstance(args, tuple) or not isinstance(kwargs, dict):
                    raise ValueError("args must be a tuple and kwargs a dict")
            except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
                detail = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc) or type(exc).__name__
                problem = f"has a malformed sample {entry['sample_id']} of function {name!r} ({detail})"
                raise BadInputError(path, problem) from None
            data[name].append((entry["calls"], (args, kwargs)))
    check_totals(data, path)
    return data


def check_totals(function_data: dict, path: str | os.PathLike | None) -> None:
    """Every function's calls and tensor bytes, added up over its samples, fit the BIGINT columns they go to."""
    for name, entries in function_data.items():
        if sum(c for c, _ in entries) > MAX_COUNT or sum(tensor_bytes(s) for _, s in entries) > MAX_COUNT:
            raise BadInputError(
                path, f"has calls or tensor bytes of function {name!r} that add up past {MAX_COUNT} (64 bits)"
            )


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
