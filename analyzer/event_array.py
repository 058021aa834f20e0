"""The trace's ``traceEvents`` array, cut into parts that load in parallel.

A Kineto trace is one JSON object whose ``traceEvents`` array holds nearly all bytes. Parsing the whole
object needs several times the file in memory, so the array's bytes are cut, never parsed here, into parts
of consecutive events, cut between two events (``}`` ``,`` ``{``). A plain ``.json`` is cut at evenly
spaced offsets; a ``.json.gz`` is decompressed as a stream (ISA-L's igzip where installed, 3x faster than
zlib) and cut every ``part_bytes``. With the native reader (``in_place``), a plain file's parts are ranges
of the file, mapped while read, and a stream's are kept in memory; for DuckDB's reader, or when a part is
left to it, a part is a file holding a JSON array (a plain file's range copied by the kernel,
``os.copy_file_range``). Each part is handed to ``on_part`` as soon as it is complete, so loading overlaps
decompression. A cut in the wrong place (inside a string or a nested object) leaves a part that is not
valid JSON; the loader then reads the array again as one part. The few header keys around the array are
parsed with orjson.
"""

from __future__ import annotations

import gzip
import io
import mmap
import os
import re
import threading
import zlib
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

from .errors import BadInputError

try:  # ISA-L: same format as gzip, decompresses ~3x faster; plain gzip where it is not installed
    from isal.igzip import IGzipFile as _GzipReader
    from isal.isal_zlib import error as _IsalError
except ImportError:  # pragma: no cover - isal is a dependency, but the analyzer must not need it
    _GzipReader, _IsalError = gzip.GzipFile, zlib.error

CHUNK = 8 << 20
HEAD_LIMIT = 64 << 20  # the header keys (deviceProperties…) are a few KB; give up on the fast path past this
TAIL_KEEP = 1 << 20
MAX_BUFFER_BYTES = 256 << 20  # a streamed part's buffer starts at most this large
SEARCH_OVERLAP = 64  # a boundary the last search could not see whole starts at most this far before its end
GZIP_MAGIC = b"\x1f\x8b"
# between two events: the end of one object, a comma, the start of the next one's first key (a match
# inside a string or a nested value is possible, never silent: the part is then not valid JSON)
BOUNDARY = re.compile(rb'\}\s*,\s*(?=\{\s*")')
SEARCH_WINDOW = 4 << 20


@dataclass
class Part:
    """One part of the ``traceEvents`` array: a part file holding a JSON array of consecutive events; or, for a
    plain trace read in place, bytes ``[first, last)`` of the trace: those events alone (``{…},{…}``), mapped
    only while a reader reads them (so they leave memory with it); or, for a decompressed stream read in
    place, the array in memory (``data``). Either of the last two is written to the part file only when a
    reader needs a file."""

    index: int
    file: str
    source: Path | None = None
    first: int = 0
    last: int = 0
    data: memoryview | None = None  # a streamed part kept in memory: its JSON array, until read
    buffers: _Buffers | None = None  # where data's memory goes back once read

    def drop_data(self) -> None:
        """Give a part kept in memory back to its buffers (its data must be on file if still needed)."""
        if self.data is not None:
            view, self.data = self.data, None
            source = view.obj
            view.release()
            self.buffers.give(source)

    @contextmanager
    def contents(self):
        """``(buffer, bare)`` for the ``with`` block: the part's bytes (a file or a range of the trace mapped
        for the block, or the data in memory), and whether they are the events alone rather than an array."""
        if self.data is not None:
            yield self.data, False
            return
        path, first, last = (self.source, self.first, self.last) if self.source is not None else (self.file, 0, None)
        with open(path, "rb") as raw:
            last = os.fstat(raw.fileno()).st_size if last is None else last
            if last <= first:
                yield b"", self.source is not None
                return
            start = first - first % mmap.ALLOCATIONGRANULARITY
            with mmap.mmap(raw.fileno(), last - start, access=mmap.ACCESS_READ, offset=start) as mapped:
                view = memoryview(mapped)[first - start :]
                try:
                    yield view, self.source is not None
                finally:
                    view.release()

    def as_file(self) -> str:
        if self.data is not None and not os.path.exists(self.file):
            with open(self.file, "wb") as out:
                out.write(self.data)
        if self.source is not None and not os.path.exists(self.file):
            with open(self.source, "rb") as raw, open(self.file, "wb", buffering=0) as out:
                out.write(b"[")
                _copy_range(raw.fileno(), out, self.first, self.last - self.first)
                out.write(b"]")
        return self.file


Advance = Callable[[int, BinaryIO], None]
OnPart = Callable[[int, Part], None]


class CutFailed(Exception):
    """The cuts did not fall between events; read the array again as one part."""


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as raw:
        return raw.read(2) == GZIP_MAGIC


def split_event_array(
    path: Path,
    scratch: str,
    *,
    compressed: bool,
    part_bytes: int,
    on_part: OnPart,
    advance: Advance,
    in_place: bool = False,
) -> dict:
    """Cut the bytes of ``traceEvents`` into parts (part files in ``scratch``); return the other top-level keys.

    ``on_part(index, part)`` is called once per part, in order, as soon as the part is complete. ``in_place``:
    a plain trace's parts are ranges of the file (Part.source), and a compressed one's are kept in memory
    (Part.data), neither written to a part file until a reader asks.
    """
    with open_trace(path, compressed) as stream:
        head = _read_head(stream)
        found = _find_events_key(head)
        if found is None:
            return _slow_path(path, head, stream, scratch, on_part)
        key_start, array_start = found
        if compressed:
            advance(len(head), stream)
            tail_keys = _stream_parts(path, stream, head[array_start:], scratch, part_bytes, on_part, advance, in_place)
        else:
            tail_keys = _copy_parts(path, stream, array_start, scratch, part_bytes, on_part, advance, in_place)
    keys = _parse_object(path, head[:key_start].rstrip().rstrip(b",") + b"}", "the header before traceEvents")
    keys.update(tail_keys)
    return keys


def part_file(scratch: str, index: int) -> str:
    return os.path.join(scratch, f"events-{index:05d}.json")


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


def _copy_parts(
    path: Path,
    raw: BinaryIO,
    array_start: int,
    scratch: str,
    part_bytes: int,
    on_part: OnPart,
    advance: Advance,
    in_place: bool,
) -> dict:
    """A plain file: find the array's end and evenly spaced cuts, then copy each part's byte range (or, in
    place, hand out each range of the file, between the array's brackets)."""
    fd = raw.fileno()
    size = os.fstat(fd).st_size
    tail_start = max(array_start, size - TAIL_KEEP)
    cut, tail_keys = _find_array_end(path, os.pread(fd, size - tail_start, tail_start))
    end = tail_start + cut
    ranges, start = [], array_start  # part i is bytes [first, last) of the file, each a whole number of events
    count = max(1, round((end - array_start) / max(part_bytes, 1)))
    for i in range(1, count):
        target = max(start, array_start + i * (end - array_start) // count)
        match = BOUNDARY.search(os.pread(fd, SEARCH_WINDOW, target))
        if match is None or target + match.end() >= end:
            continue
        ranges.append((start, target + match.start() + 1))
        start = target + match.end()
    ranges.append((start, end))
    if in_place:
        inner = [(max(first, array_start + 1), min(last, end - 1)) for first, last in ranges]  # without [ ]
        for index, (first, last) in enumerate(inner):
            advance(last - first, raw)
            on_part(index, Part(index, part_file(scratch, index), path, first, last))
        return tail_keys
    for index, (first, last) in enumerate(ranges):
        out_path = part_file(scratch, index)
        with open(out_path, "wb", buffering=0) as out:
            if index:
                out.write(b"[")
            _copy_range(fd, out, first, last - first)
            if index < len(ranges) - 1:
                out.write(b"]")
        advance(last - first, raw)
        on_part(index, Part(index, out_path))
    return tail_keys


def _copy_range(fd: int, out: BinaryIO, offset: int, count: int) -> None:
    """Copy ``count`` bytes at ``offset`` of ``fd`` to ``out``: in the kernel where it can, else by chunks."""
    while count:
        try:
            n = os.copy_file_range(fd, out.fileno(), count, offset)
        except (AttributeError, OSError):  # not Linux, or a file system that cannot
            n = out.write(os.pread(fd, min(count, CHUNK), offset))
        if not n:
            raise EOFError("the file is shorter than it was a moment ago")
        offset += n
        count -= n


def _stream_parts(
    path: Path,
    stream: BinaryIO,
    first: bytes,
    scratch: str,
    part_bytes: int,
    on_part: OnPart,
    advance: Advance,
    in_memory: bool,
) -> dict:
    """A compressed stream: parts of about ``part_bytes``, each decompressed straight into a buffer and cut at the
    first boundary past that size; handed out in memory, or written to a part file (not ``in_memory``)."""
    buffers = _Buffers(min(part_bytes, MAX_BUFFER_BYTES) + 2 * CHUNK)  # grown for larger parts
    index, out = 0, _PartWriter(part_file(scratch, 0), buffers, in_memory)
    out.write(first)
    raw_start = 0  # where the stream's bytes begin in the part: after the "[" put before all but the first
    before = b""  # the last TAIL_KEEP bytes of the stream before the part
    searched = 0  # the part holds no boundary past part_bytes before this offset
    try:
        while True:
            while out.size > part_bytes:
                match = BOUNDARY.search(out.buffer, max(part_bytes, searched), out.size)
                if match is None:
                    searched = out.size - SEARCH_OVERLAP
                    break
                rest = bytes(memoryview(out.buffer)[match.end() : out.size])
                before = _last_bytes(before, memoryview(out.buffer)[raw_start : match.end()])
                out.size = match.start() + 1
                out.write(b"]")
                on_part(index, out.part(index))
                index += 1
                out = _PartWriter(part_file(scratch, index), buffers, in_memory)
                out.write(b"[")
                out.write(rest)
                raw_start, searched = 1, 0
            count = out.fill(stream, CHUNK)
            if not count:
                break
            advance(count, stream)
        tail = _last_bytes(before, memoryview(out.buffer)[raw_start : out.size])
        cut, tail_keys = _find_array_end(path, tail)
        after = len(tail) - cut  # bytes after the array: they must all be in the last part
        if after >= out.size:
            raise CutFailed
        out.size -= after
    except BaseException:
        out.abandon()
        raise
    on_part(index, out.part(index))
    return tail_keys


def _direct_reader(stream: BinaryIO) -> BinaryIO:
    """What reads ``stream``'s bytes into a buffer without a copy: a gzip file's own buffered reader (GzipFile and
    isal's IGzipFile read into an intermediate bytes object, then copy; their buffered reader decompresses large
    reads straight into the target), else the stream."""
    inner = getattr(stream, "_buffer", None)
    return inner if isinstance(inner, io.BufferedReader) else stream


def _last_bytes(before: bytes, view: memoryview) -> bytes:
    """The last TAIL_KEEP bytes of ``before`` followed by ``view``."""
    with view:
        if len(view) >= TAIL_KEEP:
            return bytes(view[len(view) - TAIL_KEEP :])
        return (before + bytes(view))[-TAIL_KEEP:]


class _Buffers:
    """The buffers streamed parts are decompressed into, reused: a new 64 MB buffer per part cost a page fault
    for every 4 KB of it, on the thread that decompresses. As many exist as parts are in memory at once
    (ingest.py bounds that)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._free: list[mmap.mmap] = []
        self._lock = threading.Lock()

    def take(self) -> mmap.mmap:
        with self._lock:
            if self._free:
                return self._free.pop()
        return anonymous_memory(self.capacity)

    def give(self, buffer: mmap.mmap) -> None:
        with self._lock:
            self._free.append(buffer)


def anonymous_memory(size: int) -> mmap.mmap:
    """``size`` bytes of fresh memory, in huge pages where the system gives them on request: a bytearray this
    large was zeroed byte by byte and took a page fault per 4 KB (0.2 s of a 1 GB .json.gz's ingest)."""
    memory = mmap.mmap(-1, size)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        memory.madvise(mmap.MADV_HUGEPAGE)
    return memory


class _PartWriter:
    """A streamed part's bytes, in a buffer: the decompressor writes into it (fill), sparing a copy of every
    chunk (the copies took 0.5 s of the decompressing thread's 1.4 s on a 1 GB .json.gz). The part is then handed
    out in memory, or written to its part file and the buffer reused. Memory spares the writes to disk and
    their writeback, 1.5 s of a 1 GB trace's 2.3 s ingest here."""

    def __init__(self, file: str, buffers: _Buffers, in_memory: bool) -> None:
        self.file = file
        self.buffers = buffers
        self.in_memory = in_memory
        self.buffer = buffers.take()
        self.size = 0

    def write(self, data: bytes) -> None:
        end = self.size + len(data)
        self._reserve(end)
        self.buffer[self.size : end] = data
        self.size = end

    def fill(self, stream: BinaryIO, count: int) -> int:
        """Read up to ``count`` more bytes of ``stream`` into the buffer; how many (0 at its end)."""
        self._reserve(self.size + count)
        with memoryview(self.buffer) as view, view[self.size : self.size + count] as target:
            read = _direct_reader(stream).readinto(target)
        self.size += read
        return read

    def _reserve(self, size: int) -> None:
        """Make the buffer hold at least ``size`` bytes (a part with no boundary past part_bytes for a while)."""
        if size > len(self.buffer):
            grown = anonymous_memory(max(size, 2 * len(self.buffer)))
            grown[: self.size] = self.buffer[: self.size]
            self.buffer = grown

    def abandon(self) -> None:
        """Give the buffer back, unless a part holds it."""
        if self.buffer is not None:
            self.buffers.give(self.buffer)
            self.buffer = None

    def part(self, index: int) -> Part:
        """The part, which then holds the buffer (in memory) or its bytes on file (and the buffer is reused)."""
        buffer, self.buffer = self.buffer, None
        if self.in_memory:
            return Part(index, self.file, data=memoryview(buffer)[: self.size], buffers=self.buffers)
        with open(self.file, "wb") as out, memoryview(buffer) as view:
            out.write(view[: self.size])
        self.buffers.give(buffer)
        return Part(index, self.file)


@contextmanager
def open_trace(path: Path, compressed: bool):
    """The trace's bytes, decompressed when it is gzip; a failure to open, read or decompress them (in the
    ``with`` block too) is BadInputError."""
    try:
        with open(path, "rb") as raw:
            if not compressed:
                yield raw
                return
            with _GzipReader(fileobj=raw, mode="rb") as stream:
                yield stream
    except (OSError, EOFError, zlib.error, _IsalError) as exc:
        raise BadInputError(path, f"cannot be decompressed or read ({exc})") from None


def parse_whole(path: Path, stream: BinaryIO, scratch: str) -> dict:
    """Parse the whole document (``stream`` from open_trace); write its traceEvents as part 0 in
    ``scratch``; return the other keys."""
    return _slow_path(path, b"", stream, scratch, lambda index, file: None)


def _slow_path(path: Path, head: bytes, stream: BinaryIO, scratch: str, on_part: OnPart) -> dict:
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
    with open(part_file(scratch, 0), "wb") as out:
        out.write(orjson.dumps(doc.pop("traceEvents")))
    on_part(0, Part(0, part_file(scratch, 0)))
    return doc


def _parse_object(path: Path, text: bytes, what: str) -> dict:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise BadInputError(path, f"{what} is not valid JSON") from None
    if not isinstance(value, dict):
        raise BadInputError(path, f"{what} is not a JSON object")
    return value
