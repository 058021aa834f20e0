"""Load a Kineto/Chrome trace (``.json`` or ``.json.gz``) into the DuckDB table ``events``.

The trace is one JSON object whose ``traceEvents`` array holds nearly all bytes. Parsing the whole
object (orjson, or DuckDB's ``read_json`` of one huge object) needs several times the file in memory,
so the array's bytes are streamed, chunk by chunk, into a scratch file that DuckDB reads as a JSON
array with fixed columns (PACKAGING.md measured this at ~7x faster and ~4x leaner). The few header
keys around the array are parsed with orjson.
"""

from __future__ import annotations

import gzip
import os
import sys
import tempfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import duckdb
import orjson

from .errors import BadInputError
from .sql import run_sql_file
from .validate import describe_unreadable_events

CHUNK = 8 << 20
HEAD_LIMIT = 64 << 20  # the header keys (deviceProperties…) are a few KB; give up on the fast path past this
TAIL_KEEP = 1 << 20
WHOLE_PARSE_LIMIT = 64 << 20  # a trace the fast path could not cut is parsed whole up to this many bytes of events
PROGRESS_MIN_BYTES = 64 << 20
GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class TraceHeader:
    """The trace's keys other than ``traceEvents`` (device properties, base time, distributed info…)."""

    path: str
    compressed: bool
    size_bytes: int
    keys: dict = field(default_factory=dict)


def ingest_trace(con: duckdb.DuckDBPyConnection, path: str | os.PathLike, *, progress: bool = False) -> TraceHeader:
    """Create table ``events`` (see ingest.sql) from the trace at ``path`` and return its header keys."""
    path = Path(path)
    if not path.is_file():
        raise BadInputError(path, "no such trace file" if not path.exists() else "is not a file")
    size = path.stat().st_size
    if size == 0:
        raise BadInputError(path, "the file is empty")
    with open(path, "rb") as raw:
        compressed = raw.read(2) == GZIP_MAGIC
    header = TraceHeader(str(path), compressed, size)
    with tempfile.TemporaryDirectory(prefix="kernelscope-") as scratch:
        array_file = os.path.join(scratch, "traceEvents.json")
        header.keys = _extract_event_array(path, compressed, size, array_file, progress)
        error, problem = _load_events(con, array_file)
        if error and problem is None and os.path.getsize(array_file) <= WHOLE_PARSE_LIMIT:
            # The streamed array is not JSON: corrupt, or cut at the wrong ']' (keys after traceEvents
            # holding arrays). A whole-document parse settles which, for inputs of bounded size.
            header.keys = _reparse_whole(path, compressed, array_file)
            error, problem = _load_events(con, array_file)
        if error is None:
            return header
        detail = _first_line(error).replace(array_file, "traceEvents")
        raise BadInputError(path, problem or f"traceEvents is not a valid array of events ({detail})")


def _load_events(con: duckdb.DuckDBPyConnection, array_file: str) -> tuple[duckdb.Error | None, str | None]:
    """Run ingest.sql; on failure, DuckDB's error and the first unreadable event (if one is)."""
    try:
        run_sql_file(con, "ingest.sql", events_file=array_file)
    except duckdb.Error as exc:
        return exc, describe_unreadable_events(con, array_file)
    return None, None


def _reparse_whole(path: Path, compressed: bool, out_path: str) -> dict:
    try:
        with _open_stream(path, compressed) as stream:
            return _slow_path(path, b"", stream, out_path)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise BadInputError(path, f"cannot be decompressed or read ({exc})") from None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


@contextmanager
def _open_stream(path: Path, compressed: bool):
    with open(path, "rb") as raw:
        yield gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw


def _extract_event_array(path: Path, compressed: bool, size: int, out_path: str, progress: bool) -> dict:
    """Stream the bytes of ``traceEvents`` to ``out_path``; return the other top-level keys."""
    try:
        with _progress(path, size, progress) as advance, _open_stream(path, compressed) as stream:
            head = _read_head(stream)
            start = _find_events_key(head)
            if start is None:
                return _slow_path(path, head, stream, out_path)
            key_end, array_start = start
            prefix = head[:key_end]
            with open(out_path, "wb") as out:
                out.write(head[array_start:])
                advance(len(head), stream)
                tail = _copy_rest(stream, out, head[array_start:], advance)
                cut, tail_keys = _find_array_end(path, tail)
                out.truncate(out.tell() - (len(tail) - cut))
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise BadInputError(path, f"cannot be decompressed or read ({exc})") from None
    keys = _parse_object(path, prefix.rstrip().rstrip(b",") + b"}", "the header before traceEvents")
    keys.update(tail_keys)
    return keys


def _read_head(stream: BinaryIO) -> bytes:
    head = b""
    while len(head) < HEAD_LIMIT:
        chunk = stream.read(CHUNK if head else 1 << 16)
        if not chunk:
            break
        head += chunk
        if b'"traceEvents"' in head:
            break
    return head


def _find_events_key(head: bytes) -> tuple[int, int] | None:
    """(offset of the key, offset of its array's ``[``) when ``"traceEvents"`` is a top-level key."""
    pos = head.find(b'"traceEvents"')
    while pos != -1:
        before = head[:pos].rstrip()
        after = head[pos + len(b'"traceEvents"') :]
        stripped = after.lstrip()
        if (before.endswith(b"{") or before.endswith(b",")) and stripped.startswith(b":"):
            rest = stripped[1:].lstrip()
            if rest.startswith(b"["):
                try:
                    orjson.loads(before.rstrip(b",") + b"}")
                except orjson.JSONDecodeError:
                    pass
                else:
                    return pos, len(head) - len(rest)
        pos = head.find(b'"traceEvents"', pos + 1)
    return None


def _copy_rest(stream: BinaryIO, out: BinaryIO, first: bytes, advance) -> bytes:
    """Copy the rest of the stream to ``out``; return its last TAIL_KEEP bytes (where the array closes)."""
    tail = first[-TAIL_KEEP:]
    while True:
        chunk = stream.read(CHUNK)
        if not chunk:
            return tail
        out.write(chunk)
        tail = (tail + chunk)[-TAIL_KEEP:]
        advance(len(chunk), stream)


def _find_array_end(path: Path, tail: bytes) -> tuple[int, dict]:
    """Offset just past the array's closing ``]`` in ``tail``, and the keys that follow it."""
    pos = tail.rfind(b"]")
    while pos != -1:
        try:
            keys = orjson.loads(b'{"traceEvents":[]' + tail[pos + 1 :])
        except orjson.JSONDecodeError:
            pos = tail.rfind(b"]", 0, pos)
            continue
        if isinstance(keys, dict):
            keys.pop("traceEvents", None)
            return pos + 1, keys
        break
    raise BadInputError(path, "the JSON ends before the trace object is complete (truncated or corrupt)")


def _slow_path(path: Path, head: bytes, stream: BinaryIO, out_path: str) -> dict:
    """Whole-document parse, for JSON whose ``traceEvents`` is not where Kineto puts it."""
    data = head + stream.read()
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadInputError(path, f"is not valid JSON ({exc})") from None
    if isinstance(doc, list):  # the Chrome trace format also allows a bare array of events
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise BadInputError(path, "is JSON but not a Kineto/Chrome trace (no traceEvents array)")
    with open(out_path, "wb") as out:
        out.write(orjson.dumps(doc.pop("traceEvents")))
    return doc


def _parse_object(path: Path, text: bytes, what: str) -> dict:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise BadInputError(path, f"{what} is not valid JSON") from None
    if not isinstance(value, dict):
        raise BadInputError(path, f"{what} is not a JSON object")
    return value


@contextmanager
def _progress(path: Path, size: int, enabled: bool):
    """A byte-progress bar on stderr for large inputs; a no-op callback otherwise."""
    if not enabled or size < PROGRESS_MIN_BYTES or not sys.stderr.isatty():
        yield lambda n, stream: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task(f"reading {path.name}", total=size)

        def advance(_n: int, stream: BinaryIO) -> None:
            raw = getattr(stream, "fileobj", stream)  # compressed bytes consumed, comparable to the file size
            bar.update(task, completed=raw.tell())

        yield advance
