"""A run's sample tensors (samples.pt), read offline and safely.

samples.pt is a torch.save file, i.e. a pickle: loading it with plain unpickling would run whatever
code a hostile file names. It is read here and nowhere else in the analyzer, only through
``torch.load(weights_only=True, map_location="cpu")``, which accepts tensors, plain containers and
scalars and refuses everything else. torch is imported on the call, never with the package.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from .errors import BadInputError, KernelscopeError

TORCH_HINT = "reading sample tensors needs torch (pip install 'kernelscope[record]')"
_BOILERPLATE = ("Weights only load failed", "Please file an issue", "Check the documentation", "(1)", "(2)")


def load_sample_tensors(run_dir: Path, manifest: dict, function_data: dict) -> dict:
    """``{function: [(calls, (args, kwargs)), ...]}`` with the stored tensors (on the CPU).

    ``function_data`` is the metadata view of samples.json; a signature whose tensors were not kept
    (over the recorder's sample memory cap) keeps its metadata entry (TensorMeta in place of tensors).
    """
    name = manifest["files"].get("sample_tensors")
    if name is None:
        saved = manifest.get("sample_tensors")
        reason = saved.get("reason") if isinstance(saved, dict) else None
        raise BadInputError(
            run_dir, "holds no sample tensors (samples.pt was not saved" + (f": {reason})" if reason else ")")
        )
    path = Path(run_dir) / name
    if not path.is_file():
        raise BadInputError(run_dir, f"is a run directory missing its {name} (the sample tensors)")
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        raise KernelscopeError(path, TORCH_HINT) from None
    try:
        store = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # any failure to read an untrusted file is bad input, nothing else
        raise BadInputError(path, f"was refused by torch.load(weights_only=True): {_reason(exc)}") from None
    functions = store.get("functions") if isinstance(store, dict) else None
    if not isinstance(functions, dict) or functions.keys() != function_data.keys():
        raise BadInputError(path, "does not hold the functions of samples.json (a sample store of another run?)")
    result = {}
    for function, entries in function_data.items():
        stored = functions[function]
        if not isinstance(stored, list) or len(stored) != len(entries):
            raise BadInputError(path, f"holds {_count(stored)} samples of {function!r}, samples.json {len(entries)}")
        result[function] = [_entry(path, function, meta, value) for meta, value in zip(entries, stored, strict=True)]
    return result


def _entry(path: Path, function: str, meta: tuple[int, tuple], value: Any) -> tuple[int, tuple]:
    calls, metadata = meta
    if value is None:  # not kept: over the recorder's sample memory cap
        return calls, metadata
    if not (isinstance(value, (list, tuple)) and len(value) == 2):
        raise BadInputError(path, f"holds a sample of {function!r} that is not [args, kwargs]")
    args, kwargs = value
    if not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict):
        raise BadInputError(path, f"holds a sample of {function!r} whose args or kwargs are malformed")
    return calls, (tuple(args), kwargs)


def _count(value: Any) -> str:
    return str(len(value)) if isinstance(value, list) else "no list of"


def _reason(exc: Exception) -> str:
    """torch's specific complaint in one sentence, without its advice to retry with weights_only=False."""
    text = str(exc)
    marker = "WeightsUnpickler error:"
    if marker in text:
        text = text.split(marker, 1)[1]
    lines = [line.strip() for line in text.splitlines()]
    useful = [line for line in lines if line and not line.startswith(_BOILERPLATE)]
    if not useful:
        return type(exc).__name__
    return useful[0].split(". ", 1)[0].rstrip(".") + "."
