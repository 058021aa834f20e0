"""A run's sample tensors (samples.pt), read offline and safely.

samples.pt is a torch.save file, i.e. a pickle: loading it with plain unpickling would run whatever
code a hostile file names. It is read here and nowhere else in the analyzer, only through
``torch.load(weights_only=True, map_location="cpu")``, which accepts tensors, plain containers and
scalars and refuses everything else. torch is imported on the call, never with the package.
"""

from __future__ import annotations

import importlib
import os
import pickletools
import re
import zipfile
from pathlib import Path
from typing import Any

from .errors import BadInputError, KernelscopeError
from .rundir import held_file, nested_deeper_than, values_more_than
from .samples import MAX_NESTING

TORCH_HINT = "reading sample tensors needs torch (pip install 'kernelscope[record]')"
_BOILERPLATE = ("Weights only load failed", "Please file an issue", "Check the documentation", "(1)", "(2)")
RAM_SHARE = 0.5  # of the machine's memory, the most a samples.pt may declare (the reading holds all of it)
MAX_STORE_VALUES = 1 << 22  # values of all samples, walked as trees: the recorder keeps arguments, not millions
_STORAGE_TYPE = re.compile(r"torch(?:\.storage)? ([A-Za-z0-9]+)Storage")
# bytes per element of the storage types torch.save names (torch.storage.UntypedStorage: the dtypes without one)
_ITEM_BYTES = {
    "Untyped": 1, "Byte": 1, "Char": 1, "Bool": 1, "QInt8": 1, "QUInt8": 1, "QUInt4x2": 1, "QUInt2x4": 1,
    "Short": 2, "Half": 2, "BFloat16": 2, "Int": 4, "Float": 4, "QInt32": 4, "Long": 8, "Double": 8,
    "ComplexFloat": 8, "ComplexDouble": 16,
}  # fmt: skip


def why_not_saved(saved: Any) -> str | None:
    """Why a run's samples.pt was not written, from its manifest's ``sample_tensors`` entry: said from its sizes where
    it has them (the recorder's own sentence before 2026-12-05 read "over the limit of 0" for a limit of none)."""
    if not isinstance(saved, dict):
        return None
    held, limit = saved.get("bytes"), saved.get("limit_bytes")
    if type(held) is int and type(limit) is int and held > limit:
        if limit == 0:
            kept_none = "recorded with sample_tensor_limit_mb=0, which keeps none"
            return f"{kept_none}; its distinct inputs hold {size_text(held)}"
        return f"its distinct inputs hold {size_text(held)}, over the limit of {size_text(limit)}"
    reason = saved.get("reason")
    return reason if isinstance(reason, str) and reason else None


def size_text(size: int) -> str:
    """A size as a user reads it: MiB to a tenth, bytes below a tenth of one (a tiny model's inputs)."""
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 // 10 else f"{size:,} bytes"


def load_sample_tensors(run_dir: Path, manifest: dict, function_data: dict) -> dict:
    """``{function: [(calls, (args, kwargs)), ...]}`` with the stored tensors (on the CPU).

    ``function_data`` is the metadata view of samples.json; a signature whose tensors were not kept
    (over the recorder's sample memory cap) keeps its metadata entry (TensorMeta in place of tensors).
    """
    name = manifest["files"].get("sample_tensors")
    if name is None:
        reason = why_not_saved(manifest.get("sample_tensors"))
        raise BadInputError(
            run_dir, "holds no sample tensors (samples.pt was not saved" + (f": {reason})" if reason else ")")
        )
    path = held_file(run_dir, name, f"is a run directory missing its {name} (the sample tensors)")
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        raise KernelscopeError(path, TORCH_HINT) from None
    check_declared_sizes(path, read_limit_bytes())
    try:
        store = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # any failure to read an untrusted file is bad input, nothing else
        raise BadInputError(path, f"was refused by torch.load(weights_only=True): {_reason(exc)}") from None
    functions = store.get("functions") if isinstance(store, dict) else None
    if not isinstance(functions, dict) or functions.keys() != function_data.keys():
        raise BadInputError(path, "does not hold the functions of samples.json (a sample store of another run?)")
    if values_more_than(functions, MAX_STORE_VALUES):  # before any walk of the samples, which would be as long
        raise BadInputError(path, f"holds more than {MAX_STORE_VALUES:,} values in its samples, walked as a tree")
    result = {}
    for function, entries in function_data.items():
        stored = functions[function]
        if not isinstance(stored, list) or len(stored) != len(entries):
            raise BadInputError(path, f"holds {_count(stored)} samples of {function!r}, samples.json {len(entries)}")
        result[function] = [_entry(path, function, meta, value) for meta, value in zip(entries, stored, strict=True)]
    return result


def read_limit_bytes() -> int:
    """The most bytes a samples.pt may declare: RAM_SHARE of the machine's memory (16 GiB where it is unknown)."""
    try:
        return int(RAM_SHARE * os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return 16 << 30


def check_declared_sizes(path: Path, limit: int) -> None:
    """Refuse, before torch.load reads anything, a samples.pt whose sizes would take more memory than it holds or
    than ``limit``: a compressed entry (torch.save stores its entries, so a deflated one is a bomb: tens of MB can
    inflate to gigabytes), entries that declare more bytes than the file has (overlapping entries), and storages whose
    declared size is not their entry's. torch.load then allocates no more than the entries' sizes."""
    try:
        with zipfile.ZipFile(path) as archive:
            entries = {info.filename: info for info in archive.infolist()}
            pickles = [name for name in entries if name.endswith("/data.pkl")]
            compressed = next((i for i in entries.values() if i.compress_type != zipfile.ZIP_STORED), None)
            if compressed is not None:
                raise BadInputError(
                    path, f"holds a compressed entry ({compressed.filename}); torch.save compresses none"
                )
            declared = sum(info.file_size for info in entries.values())
            if declared > os.path.getsize(path) or any(i.file_size != i.compress_size for i in entries.values()):
                raise BadInputError(path, "declares more bytes than the file holds (entries that overlap)")
            if declared > limit:
                problem = f"declares {declared} bytes, more than the {limit} that reading sample tensors may take here"
                raise BadInputError(path, problem)
            if len(pickles) != 1:
                raise BadInputError(path, "is not a file that torch.save writes (no single data.pkl)")
            storages = _declared_storages(path, archive.read(pickles[0]))
    except zipfile.BadZipFile as exc:
        raise BadInputError(path, f"is not a file that torch.save writes (not a zip archive: {exc})") from None
    folder = pickles[0].removesuffix("data.pkl") + "data/"
    for key, size in storages.items():
        entry = entries.get(folder + key)
        if entry is None or entry.file_size != size:
            held = "no entry" if entry is None else f"an entry of {entry.file_size} bytes"
            raise BadInputError(path, f"declares storage {key!r} of {size} bytes, and holds {held} for it")


def _declared_storages(path: Path, data: bytes) -> dict[str, int]:
    """``{key: bytes}`` of every storage the pickle names (its persistent ids: ``('storage', torch.XStorage, key,
    location, numel)``), found by following the pickle's stack without running it (pickletools' opcode table)."""
    mark, unknown = object(), object()
    stack: list = []
    memo: dict = {}
    storages: dict[str, int] = {}
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name == "MARK":
                stack.append(mark)
            elif op.name in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"):
                memo[len(memo) if op.name == "MEMOIZE" else arg] = stack[-1]
            elif op.name in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo[arg])
            elif op.name == "GLOBAL":
                stack.append(("global", arg))
            elif op.name == "STACK_GLOBAL":
                name, module = stack.pop(), stack.pop()
                stack.append(("global", f"{module} {name}"))
            elif op.name in ("TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"):
                count = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}.get(op.name)
                items = _pop_to_mark(stack, mark) if count is None else [stack.pop() for _ in range(count)][::-1]
                stack.append(tuple(items))
            elif op.name == "BINPERSID":
                key, size = _storage(stack.pop())
                storages[key] = size
                stack.append(unknown)
            else:
                before = op.stack_before
                if pickletools.markobject in before:
                    _pop_to_mark(stack, mark)
                    before = before[: before.index(pickletools.markobject)]
                for _ in before:
                    stack.pop()
                value = arg if isinstance(arg, (int, str)) and not isinstance(arg, bool) else unknown
                stack.extend([value] if len(op.stack_after) == 1 else [unknown] * len(op.stack_after))
    except (ValueError, IndexError, KeyError) as exc:
        raise BadInputError(path, f"holds a data.pkl that is not a pickle torch.save writes ({exc})") from None
    return storages


def _pop_to_mark(stack: list, mark: object) -> list:
    items = []
    while (item := stack.pop()) is not mark:
        items.append(item)
    return items[::-1]


def _storage(pid: Any) -> tuple[str, int]:
    """The key and bytes of a storage's persistent id; ValueError for anything else."""
    if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], tuple)):
        raise ValueError("a persistent id that is not a storage")
    kind, key, numel = _STORAGE_TYPE.fullmatch(str(pid[1][1])), pid[2], pid[4]
    if kind is None or kind.group(1) not in _ITEM_BYTES or not isinstance(key, str) or type(numel) is not int:
        raise ValueError(f"a storage of type {pid[1][1]!r}, key {key!r}, {numel!r} elements")
    return key, max(numel, 0) * _ITEM_BYTES[kind.group(1)]


def _entry(path: Path, function: str, meta: tuple[int, tuple], value: Any) -> tuple[int, tuple]:
    calls, metadata = meta
    if value is None:  # not kept: over the recorder's sample memory cap
        return calls, metadata
    if not (isinstance(value, (list, tuple)) and len(value) == 2):
        raise BadInputError(path, f"holds a sample of {function!r} that is not [args, kwargs]")
    args, kwargs = value
    if not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict):
        raise BadInputError(path, f"holds a sample of {function!r} whose args or kwargs are malformed")
    if nested_deeper_than(args, MAX_NESTING) or nested_deeper_than(kwargs, MAX_NESTING):  # the recorder keeps none
        raise BadInputError(path, f"holds a sample of {function!r} nested deeper than {MAX_NESTING} levels")
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
