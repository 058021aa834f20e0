"""Typed errors: every expected failure names the file and says what is wrong in one sentence."""

from __future__ import annotations

import os

from ..printable import printable
from .json_text import BOM, describe_fault, wide_encoding


def type_with_article(value: object) -> str:
    """The name of ``value``'s type after its indefinite article, for a message: "an int", "a Tensor"."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


class KernelscopeError(Exception):
    """An expected failure the CLI reports as one line and a non-zero exit, without a traceback.

    The message is one line: control characters in the path or the problem (names from a trace) are escaped."""

    exit_code = 2

    def __init__(self, path: str | os.PathLike | None, problem: str):
        self.path = None if path is None else os.fspath(path)
        self.problem = problem
        super().__init__(printable(f"{self.path}: {problem}" if self.path else problem))


class BadInputError(KernelscopeError):
    """A trace, run directory or sample store that cannot be read as what it claims to be."""


class RunExistsError(KernelscopeError):
    """The destination of a run already exists and overwriting was not asked for."""


class OutputExistsError(KernelscopeError):
    """An output file (export, database) already exists and --force was not given."""


class RecordingBusyError(KernelscopeError, RuntimeError):
    """profile() was called while a recording runs in this process (re-entered, or from another thread)."""


class BadSamplesError(KernelscopeError, ValueError):
    """profile() was given samples that are not a sequence of (args, kwargs) pairs."""


# a MemoryError, or ENOMEM from the system, while a run loads: said of the trace, whose bytes are not at fault
OUT_OF_MEMORY = (
    "ran out of memory while it was loaded: the process could allocate no more (the machine's memory, or a limit on"
    " the process such as ulimit -v, is less than the load takes)"
)
PROTOBUF = "it is binary data that begins as a protobuf message does, as a Perfetto trace or an XPlane .pb, not JSON"
# the first bytes of files that other compressors write: a trace compressed with one of them is not JSON
_COMPRESSED = {
    b"\x1f\x8b": "gzip",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"PK\x03\x04": "zip",
}


# a torch.cuda.memory snapshot (_dump_snapshot) is a pickle: named by its first bytes, never unpickled
PICKLE = "it is a Python pickle, as a CUDA memory snapshot is, not JSON: it is not unpickled (that could run any code)"
# Nsight Systems' own files, by their names (nothing published says what their first bytes are)
NSIGHT_SUFFIXES = (".nsys-rep", ".qdrep", ".qdstrm")
NSIGHT_REPORT = (
    "it is an Nsight Systems report, not a torch.profiler trace: record the model with torch.profiler"
    " (export_chrome_trace), or export the report with nsys export --type json/sqlite for Nsight's own tools"
)


def is_json_text(data: bytes) -> bool:
    """Whether ``data`` begins as a JSON object or array does (blanks, or a byte order mark, before it)."""
    return data.removeprefix(BOM).lstrip()[:1] in (b"{", b"[")


def json_fault(
    data: bytes, reason: object, decompressed: bool = False, path: str | os.PathLike | None = None, lenient=False
) -> str:
    """Why ``data`` (a file's bytes, or what a gzip file ``decompressed`` to) is not JSON, for a message: the
    compressor or tool whose data it is (Nsight's by the name of its file, ``path``); in JSON text, where and what
    breaks a string (json_text.describe_fault); where it stops being UTF-8 (orjson says ``line 1 column 1 (char 0)``
    of any such document), unless the text was read ``lenient``ly (json_text.readable_text: such bytes are no fault
    of a trace's); else the parser's ``reason``."""
    if path is not None and os.fspath(path).lower().endswith(NSIGHT_SUFFIXES) and not is_json_text(data):
        return NSIGHT_REPORT
    for magic, kind in _COMPRESSED.items():
        if data.startswith(magic) and decompressed:
            return f"it decompresses to {kind}-compressed data, not JSON: it was compressed twice"
        if data.startswith(magic):
            return f"it is {kind}-compressed data: decompress it, or gzip it (.json.gz)"
    if data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):  # PROTO opcode, protocols 2-5
        return PICKLE
    if data.startswith(b"SQLite format 3\x00"):
        return "it is an SQLite database, as Nsight Systems exports its reports, not JSON"
    if data[8:12] == b"DUCK":  # a DuckDB file's magic follows its header block's checksum
        return "it is a DuckDB database (as kernelscope sql -o writes), not JSON"
    if data.startswith(b"PAR1"):
        return "it is a Parquet file (as -o and an archive write), not JSON"
    encoding = wide_encoding(data)
    if encoding is not None:
        return f"it is {encoding} text, and kernelscope reads JSON files as UTF-8"
    text = is_json_text(data)
    located = describe_fault(data, decompressed) if text else None
    if located is not None or (lenient and text):
        return located or str(reason)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if _protobuf_like(data, exc.start):
            return PROTOBUF
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return f"byte 0x{data[exc.start]:02x} at line {line} column {column} is not UTF-8"
    return str(reason)


def _protobuf_like(data: bytes, not_utf8_at: int) -> bool:
    """Whether ``data`` begins as a serialized protobuf message whose first field is a message (Perfetto's trace
    packets, XPlane's planes: tag 0x0a, then a length that is no JSON character) and stops being UTF-8 at once."""
    return data[:1] == b"\n" and len(data) > 1 and data[1:2] not in b" \t\r\n{[" and not_utf8_at < 64
