"""The parts of a compressed trace's ``traceEvents`` array, cut while it decompresses (event_array.py cuts).

A ``.json.gz`` is decompressed as a stream (ISA-L's igzip where installed, which is faster than zlib) straight into
reused buffers and cut every ``part_bytes``, at the first boundary between two events past that size; each part
is handed out as soon as it is complete, kept in memory for the native reader or written to a part file for
DuckDB's. A part may hold at most ``max_part_bytes``, and the stream at most ``max_json_bytes`` (the run's memory
and disk limits): past either the trace is refused, so a gzip bomb costs no more than the limits.
"""

from __future__ import annotations

import io
import mmap
import threading
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from .errors import BadInputError
from .json_blank_tail import last_word, trailing_blanks
from .json_text import Leniencies
from .trace_parts import (
    BOUNDARY,
    CHUNK,
    SEARCH_OVERLAP,
    TAIL_KEEP,
    Advance,
    CutFailed,
    Limits,
    OnPart,
    Part,
    find_array_end,
    open_part_file,
    part_file,
)

if TYPE_CHECKING:
    from .gzip_members import MemberStream

MAX_BUFFER_BYTES = 256 << 20  # a streamed part's buffer starts at most this large
SLACK = 1 << 20  # room left after a part moved to a larger buffer


def stream_parts(
    path: Path,
    stream: BinaryIO,
    first: bytes,
    scratch: str,
    part_bytes: int,
    on_part: OnPart,
    advance: Advance,
    in_memory: bool,
    limits: Limits,
    first_at: int = 0,
    leniencies: Leniencies | None = None,
) -> dict:
    """A compressed stream: parts of about ``part_bytes``, each decompressed straight into a buffer and cut at the
    first boundary past that size; handed out in memory, or written to a part file (not ``in_memory``). Refused
    past ``limits``: a part of more than max_part_bytes, a stream of more than max_json_bytes. ``first_at``: where
    ``first`` begins in the JSON."""
    buffers = Buffers(min(part_bytes, MAX_BUFFER_BYTES, limits.max_part_bytes) + 2 * CHUNK)  # grown for larger parts
    index, out = 0, _PartWriter(part_file(scratch, 0), buffers, in_memory)
    out.write(first)
    streamed = len(first)
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
                on_part(index, out.part(index, first_at))
                index += 1
                out = _PartWriter(part_file(scratch, index), buffers, in_memory)
                out.write(b"[")
                out.write(rest)
                raw_start, searched = 1, 0
            if out.size + CHUNK > limits.max_part_bytes:
                raise BadInputError(path, limits.part_refusal())
            count = out.fill(stream, CHUNK)
            if not count:
                break
            streamed += count
            if streamed > limits.max_json_bytes:
                raise BadInputError(path, limits.json_refusal())
            advance(count, stream)
        blank = trailing_blanks(memoryview(out.buffer)[raw_start : out.size])  # after the document, left out
        tail = _last_bytes(before, memoryview(out.buffer)[raw_start : out.size - blank])
        try:
            cut, tail_keys = find_array_end(path, tail, first_at + streamed - blank - len(tail), True, leniencies)
        except BadInputError:
            _refuse_a_word_after_blanks(path, out, raw_start, before, first_at + streamed)
            raise
        after = len(tail) - cut + blank  # bytes after the array: they must all be in the last part
        if after >= out.size:
            raise CutFailed
        out.size -= after
    except BaseException:
        out.abandon()
        raise
    on_part(index, out.part(index, first_at))
    return tail_keys


def _refuse_a_word_after_blanks(path: Path, out, start: int, before: bytes, json_end: int) -> None:
    """Refuse a decompressed trace whose last word (text with no blank in it) follows a whole trace object and blanks,
    more of them, maybe, than the tail searched for the object's end holds: the sentence names where the word
    begins. ``out``: the last part's buffer, from ``start``; ``json_end``: where it ends in the JSON."""
    with memoryview(out.buffer) as view, view[start : out.size] as body:
        end = len(body) - trailing_blanks(body)
        last = bytes(body[max(0, end - TAIL_KEEP) : end])
        word = last_word(last)
        with body[: end - word] as head:  # each view released, so the buffer can be reused
            stop = end - word - trailing_blanks(head)
        tail = bytes(body[max(0, stop - TAIL_KEEP) : stop])
    if word >= len(last) or stop <= 0:
        return
    try:
        find_array_end(path, (before + tail)[-TAIL_KEEP:] if len(tail) < TAIL_KEEP else tail)
    except BadInputError:
        return
    where = f"byte {json_end - (out.size - start) + end - word} of the JSON it decompresses to"
    raise BadInputError(path, f"is not valid JSON (trailing data at {where}, after the trace object)")


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


class Buffers:
    """The buffers streamed parts are decompressed into, reused: a fresh buffer per part would fault in every
    page of it, on the thread that decompresses. As many exist as parts are in memory at once
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
    large is zeroed byte by byte and faults in every small page of it."""
    memory = mmap.mmap(-1, size)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        memory.madvise(mmap.MADV_HUGEPAGE)
    return memory


class _PartWriter:
    """A streamed part's bytes, in a buffer: the decompressor writes into it (fill), sparing a copy of every
    chunk on the thread that decompresses, the ingest's busiest. The part is then handed out in memory, or written
    to its part file and the buffer reused. Memory spares the writes to disk and their writeback, which were most
    of a .json.gz's ingest time (benchmarks/RESULTS.md, "Parts on disk")."""

    def __init__(self, file: str, buffers: Buffers, in_memory: bool) -> None:
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

    def part(self, index: int, first_at: int) -> Part:
        """The part, which then holds the buffer (in memory) or its bytes on file (and the buffer is reused); part 0
        begins at ``first_at`` in the JSON."""
        buffer, self.buffer = self.buffer, None
        at = first_at if index == 0 else None
        if self.in_memory:
            return Part(index, self.file, data=memoryview(buffer)[: self.size], buffers=self.buffers, at=at)
        with open_part_file(self.file) as out, memoryview(buffer) as view:
            out.write(view[: self.size])
        self.buffers.give(buffer)
        return Part(index, self.file, at=at)


def stream_member_parts(
    path: Path,
    stream: MemberStream,
    first: tuple[mmap.mmap, int, int],
    array_start: int,
    scratch: str,
    on_part: OnPart,
    advance: Advance,
    limits: Limits,
    leniencies: Leniencies | None = None,
) -> dict:
    """A gzip file of indexed members, each decoded into a buffer of its own (gzip_members.MemberStream; ``first``:
    the first member's buffer, its size and how much of it was read, its ``[`` at ``array_start``): a part per
    member, in the member's own buffer, no copy. A part holds the events alone (bare) from the first boundary
    between two events in its member to the first one in the next member, whose bytes before that boundary (the
    end of the event the two share, usually a few hundred bytes) are copied after it; a member with no boundary
    is copied whole into the part. Refused past ``limits``, as stream_parts refuses."""
    pool = stream.buffers
    buffer, size, _ = first
    start, streamed, index = array_start + 1, size, 0
    try:
        while (taken := stream.take_next()) is not None:
            following, count = taken
            try:
                streamed += count
                if streamed > limits.max_json_bytes:
                    raise BadInputError(path, limits.json_refusal())
                advance(count, stream)
                match = BOUNDARY.search(following, 0, count)
                end = count if match is None else match.start() + 1
                if size - start + end > limits.max_part_bytes:
                    raise BadInputError(path, limits.part_refusal())
                if size + end > len(buffer):  # no room after the member: the part moves to a larger buffer
                    grown = anonymous_memory(max(size - start + end, len(buffer)) + SLACK)
                    grown[: size - start] = memoryview(buffer)[start:size]
                    pool.give(buffer)
                    buffer, size, start = grown, size - start, 0
                with memoryview(buffer) as into, memoryview(following) as source:
                    into[size : size + end] = source[:end]
                size += end
            except BaseException:
                pool.give(following)
                raise
            if match is None:
                pool.give(following)
                continue
            data, buffer = _view(buffer, start, size), None  # the part holds it now
            at = array_start if index == 0 else None
            on_part(index, Part(index, part_file(scratch, index), data=data, buffers=pool, bare=True, at=at))
            index += 1
            buffer, size, start = following, count, match.end()
        with memoryview(buffer) as view:
            blank = trailing_blanks(view[start:size])  # after the document, left out
            tail = bytes(view[max(start, size - blank - TAIL_KEEP) : size - blank])
        cut, tail_keys = find_array_end(path, tail, streamed - blank - len(tail), True, leniencies)
        size -= len(tail) - cut + blank + 1  # the array's "]" and what follows it
        if size < start:
            raise CutFailed
    except BaseException:
        if buffer is not None:
            pool.give(buffer)
        raise
    data, at = _view(buffer, start, size), array_start if index == 0 else None  # as a file, a "[" before its events
    on_part(index, Part(index, part_file(scratch, index), data=data, buffers=pool, bare=True, at=at))
    return tail_keys


def _view(buffer: mmap.mmap, start: int, end: int) -> memoryview:
    with memoryview(buffer) as whole:
        return whole[start:end]
