"""The trace's ``traceEvents`` array, cut into parts that load in parallel (trace_parts.py: what a part is).

A Kineto trace is one JSON object whose ``traceEvents`` array holds nearly all bytes. Parsing the whole
object needs several times the file in memory, so the array's bytes are cut, never parsed here, into parts
of consecutive events, cut between two events (``}`` ``,`` ``{``). A plain ``.json`` is cut at evenly
spaced offsets; a ``.json.gz`` is cut as it decompresses (streamed_parts.py). With the native reader
(``in_place``), a plain file's parts are ranges of the file, mapped while read; for DuckDB's reader, or when a
part is left to it, a part is a file holding a JSON array (a plain file's range copied by the kernel,
``os.copy_file_range``). Each part is handed to ``on_part`` as soon as it is complete, so loading overlaps
decompression. A cut in the wrong place (inside a string or a nested object) leaves a part that is not
valid JSON; the loader then reads the array again as one part. The few header keys around the array are
parsed with orjson; a document whose ``traceEvents`` is not where Kineto puts it is parsed whole, up to
``limits.whole_document_bytes``.
"""

from __future__ import annotations

import errno
import gzip
import os
import re
import sys
import tempfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import orjson

from .errors import BadInputError, json_fault
from .gzip_blank_tail import BlankTailGzip, ends_in_whitespace
from .gzip_members import MemberStream, bytes_after_members, gzip_members
from .json_blank_tail import HeldBlanks, content_end, last_word
from .json_text import BOM, Leniencies, loads_readable
from .streamed_parts import stream_member_parts, stream_parts
from .trace_parts import (
    BOUNDARY,
    CHUNK,
    TAIL_KEEP,
    TWO_ARRAYS,
    Advance,
    Limits,
    OnPart,
    Part,
    ScratchUnavailable,
    copy_range,
    find_array_end,
    open_part_file,
    part_file,
)
from .whole_document import find_events_key, parse_document

try:  # ISA-L: same format as gzip, decompresses faster; plain gzip where it is not installed
    from isal.igzip import IGzipFile as _GzipReader
    from isal.isal_zlib import error as _IsalError
except ImportError:  # pragma: no cover - isal is a dependency, but the analyzer must not need it
    _GzipReader, _IsalError = gzip.GzipFile, zlib.error

HEAD_LIMIT = 64 << 20  # the header keys (deviceProperties…) are a few KB; give up on the fast path past this
WHOLE_CHECK_BYTES = 64 << 20  # a plain trace whose end is not found is parsed whole, for the reason, up to this size
GZIP_MAGIC = b"\x1f\x8b"
JSON_WHITESPACE = b" \t\r\n"
SEARCH_WINDOW = 4 << 20  # a plain trace is cut at the first boundary between two events this far past each target
FIRST_SEARCH_WINDOW = 64 << 10


# errors of writing the parts to the scratch directory, which the trace is not to blame for
SCRATCH_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


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
    limits: Limits | None = None,
    threads: int = 1,
    leniencies: Leniencies | None = None,
) -> dict:
    """Cut the bytes of ``traceEvents`` into parts (part files in ``scratch``); return the other top-level keys.

    ``on_part(index, part)`` is called once per part, in order, as soon as the part is complete. ``in_place``:
    a plain trace's parts are ranges of the file (Part.source), and a compressed one's are kept in memory
    (Part.data), neither written to a part file until a reader asks. Past ``limits`` the trace is refused.
    ``threads``: how many a gzip file of indexed members (gzip_members.py) is decoded on, ahead of the cuts.
    ``leniencies``: where the keys around the array are read leniently (json_text.py), how much.
    """
    limits = limits or Limits()
    with open_trace(path, compressed, threads) as stream:
        head, skipped = _read_head(stream)
        found = find_events_key(head)
        if found is None:
            return parse_document(
                path, head, stream, scratch, on_part, limits, _is_gzip_stream(stream), leniencies
            )
        key_start, array_start = found
        first = head[array_start:]
        array_start += skipped  # where the array begins in the JSON, the blanks before the document counted
        if compressed:
            advance(len(head), stream)
            taken = _member_parts(stream, part_bytes, limits)
            if taken is not None:
                tail_keys = stream_member_parts(
                    path, stream, taken, array_start, scratch, on_part, advance, limits, leniencies
                )
            else:
                tail_keys = stream_parts(
                    path,
                    stream,
                    first,
                    scratch,
                    part_bytes,
                    on_part,
                    advance,
                    in_place,
                    limits,
                    first_at=array_start,
                    leniencies=leniencies,
                )
        else:
            tail_keys = _copy_parts(
                path, stream, array_start, scratch, part_bytes, on_part, advance, in_place, leniencies
            )
    keys = _parse_object(path, head[:key_start].rstrip().rstrip(b",") + b"}", leniencies)
    if "traceEvents" in keys:  # a first traceEvents that is no array: the one streamed is the second
        raise BadInputError(path, TWO_ARRAYS)
    keys.update(tail_keys)
    return keys


def _member_parts(stream: BinaryIO, part_bytes: int, limits: Limits):
    """The first member of a gzip file of indexed members (MemberStream.take_current), where its parts are to be
    its members (streamed_parts.stream_member_parts): members of about a part's size each, whose buffers a part
    may hold, and the head read from the first member alone; else None (the stream is cut as any other)."""
    if not isinstance(stream, MemberStream):
        return None
    sizes = [m.size for m in stream.members[:-1]]
    if min(sizes, default=part_bytes) < part_bytes // 2 or stream.buffers.capacity > limits.max_part_bytes:
        return None
    return stream.take_current()


def _read_head(stream: BinaryIO) -> tuple[bytes, int]:
    """The JSON's first bytes, up to and past the key ``"traceEvents"`` where it comes within HEAD_LIMIT, the
    whitespace before the document left out (however much: JSON allows it); and how many bytes were left out."""
    head, skipped = b"", 0
    while len(head) < HEAD_LIMIT:
        chunk = stream.read(CHUNK if head else 1 << 16)
        if not chunk:
            break
        head += chunk
        if not head.strip(JSON_WHITESPACE):
            skipped, head = skipped + len(head), b""
        elif b'"traceEvents"' in head:
            break
    return head, skipped


def _copy_parts(
    path: Path,
    raw: BinaryIO,
    array_start: int,
    scratch: str,
    part_bytes: int,
    on_part: OnPart,
    advance: Advance,
    in_place: bool,
    leniencies: Leniencies | None = None,
) -> dict:
    """A plain file: find the array's end and evenly spaced cuts, then copy each part's byte range (or, in
    place, hand out each range of the file, between the array's brackets)."""
    fd = raw.fileno()
    size = os.fstat(fd).st_size
    data_end = max(array_start, content_end(fd, size))  # blanks after the document, however many, left out
    tail_start = max(array_start, data_end - TAIL_KEEP)
    try:
        tail = os.pread(fd, data_end - tail_start, tail_start)
        cut, tail_keys = find_array_end(path, tail, tail_start, leniencies=leniencies)
    except BadInputError:
        _refuse_a_word_after_blanks(path, fd, array_start, data_end)
        _refuse_what_is_not_cut_short(path, fd, size)
        raise
    end = tail_start + cut
    ranges, start = [], array_start  # part i is bytes [first, last) of the file, each a whole number of events
    count = max(1, round((end - array_start) / max(part_bytes, 1)))
    for i in range(1, count):
        target = max(start, array_start + i * (end - array_start) // count)
        match = _first_boundary(fd, target)
        if match is None or target + match.end() >= end:
            continue
        ranges.append((start, target + match.start() + 1))
        start = target + match.end()
    ranges.append((start, end))
    if in_place:
        inner = [(max(first, array_start + 1), min(last, end - 1)) for first, last in ranges]  # without [ ]
        for index, (first, last) in enumerate(inner):
            advance(last - first, raw)
            on_part(index, Part(index, part_file(scratch, index), path, first, last, at=first - 1))
        return tail_keys
    for index, (first, last) in enumerate(ranges):
        out_path = part_file(scratch, index)
        with open_part_file(out_path, buffering=0) as out:
            if index:
                out.write(b"[")
            copy_range(path, fd, out, first, last - first)
            if index < len(ranges) - 1:
                out.write(b"]")
        advance(last - first, raw)
        on_part(index, Part(index, out_path, at=first if index == 0 else first - 1))
    return tail_keys


def _refuse_a_word_after_blanks(path: Path, fd: int, array_start: int, data_end: int) -> None:
    """Refuse a plain file whose last word (text with no blank in it) follows a whole trace object and blanks, more
    of them, maybe, than the tail searched for the object's end holds: the sentence names where the word begins."""
    last = os.pread(fd, min(TAIL_KEEP, data_end - array_start), data_end - min(TAIL_KEEP, data_end - array_start))
    word = last_word(last)
    before = content_end(fd, data_end - word)
    if word >= len(last) or before <= array_start:
        return
    start = max(array_start, before - TAIL_KEEP)
    try:
        find_array_end(path, os.pread(fd, before - start, start))
    except BadInputError:
        return
    raise BadInputError(path, f"is not valid JSON (trailing data at byte {data_end - word}, after the trace object)")


def _refuse_what_is_not_cut_short(path: Path, fd: int, size: int) -> None:
    """A plain file whose tail does not end the trace object: where it is small enough to parse whole and its JSON
    is wrong in another way than ending early (text after the trace object: a file rewritten in place by a shorter
    one, two files in one), the parser's reason; else the caller's message, that the JSON ends early."""
    if size > WHOLE_CHECK_BYTES:
        return
    data = os.pread(fd, size, 0)
    try:
        loads_readable(data.removeprefix(BOM))
    except orjson.JSONDecodeError as exc:
        if exc.msg != "unexpected end of data":
            raise BadInputError(path, f"is not valid JSON ({json_fault(data, exc, path=path, lenient=True)})") from None


def _first_boundary(fd: int, offset: int) -> re.Match | None:
    """The first boundary between two events in the SEARCH_WINDOW bytes at ``offset``: looked for in a small window
    first, widened until one is found, since one is usually a few hundred bytes away (reading the whole window for
    each cut was most of the time before the first part is handed out). A match is a match of the whole window: a
    boundary found whole in a window starts before any that would reach past its end (a boundary holds one '}')."""
    window = FIRST_SEARCH_WINDOW
    while True:
        data = os.pread(fd, window, offset)
        match = BOUNDARY.search(data)
        if match is not None or window >= SEARCH_WINDOW or len(data) < window:
            return match
        window = min(window * 16, SEARCH_WINDOW)


@contextmanager
def open_trace(path: Path, compressed: bool, threads: int = 1):
    """The trace's bytes, decompressed when it is gzip (a file of indexed members on up to ``threads`` threads,
    gzip_members.py); a failure to open, read or decompress them (in the ``with`` block too) is BadInputError."""
    try:
        with open(path, "rb") as raw:
            if not compressed:
                yield HeldBlanks(raw)
                return
            members = gzip_members(raw.fileno())
            if members is not None and len(members) > 1:
                with MemberStream(path, raw, members, threads) as stream:
                    yield stream
                return
            # whitespace after the last member, which gzip readers refuse: a reader that knows where members end
            blank_tail = ends_in_whitespace(raw.fileno())
            with BlankTailGzip(raw) if blank_tail else _GzipReader(fileobj=raw, mode="rb") as stream:
                yield HeldBlanks(stream)
    except ScratchUnavailable:
        raise
    except (OSError, EOFError, zlib.error, _IsalError) as exc:
        if isinstance(exc, OSError) and exc.errno in SCRATCH_FULL:  # writing the parts, not reading the trace
            problem = f"{exc.strerror or exc} (cutting {path.name} into parts; TMPDIR names another scratch directory)"
            raise OSError(exc.errno, problem, tempfile.gettempdir()) from None
        if isinstance(exc, OSError) and exc.errno is not None:  # the system's refusal (EIO, EACCES), not gzip's
            raise BadInputError(path, f"cannot be read ({exc.strerror or exc})") from None
        raise BadInputError(path, f"cannot be decompressed or read ({_gzip_fault(path, exc)})") from None


def _gzip_fault(path: Path, exc: BaseException) -> str:
    """Why the gzip file at ``path`` did not decompress: where its members end and what follows them when that is
    not gzip (the readers say "Not a gzipped file" of such bytes, or, of fewer than a header's, that the data
    ended early), else the decompressor's reason."""
    try:
        with open(path, "rb") as raw:
            after = bytes_after_members(raw.fileno())
    except OSError:
        after = None
    if after is None:
        return str(exc)
    offset, following = after
    shown = f"{following[:8]!r}{'…' if len(following) > 8 else ''}"
    return f"bytes after a gzip member at byte {offset}, {shown}, are not gzip: garbage after the data"


def parse_whole(
    path: Path, stream: BinaryIO, scratch: str, limits: Limits | None = None, leniencies: Leniencies | None = None
) -> dict:
    """Parse the whole document (``stream`` from open_trace); write its traceEvents as part 0 in
    ``scratch``; return the other keys."""
    on_part = lambda index, file: None  # noqa: E731 - the part is part 0, which the caller reads
    return parse_document(
        path, b"", stream, scratch, on_part, limits or Limits(), _is_gzip_stream(stream), leniencies
    )


def _is_gzip_stream(stream: BinaryIO) -> bool:
    """Whether open_trace's ``stream`` decompresses the file (its bytes are not the file's own)."""
    return isinstance(getattr(stream, "stream", stream), (MemberStream, _GzipReader, BlankTailGzip))


def _parse_object(path: Path, text: bytes, leniencies: Leniencies | None) -> dict:
    """The keys before traceEvents (find_events_key found them a JSON object), a byte order mark before them left
    out, read leniently (json_text.loads_readable)."""
    value = loads_readable(text.removeprefix(BOM), leniencies)
    if not isinstance(value, dict):
        raise BadInputError(path, "the header before traceEvents is not a JSON object")
    return value


PROGRESS_MIN_BYTES = 64 << 20


@contextmanager
def progress_bar(path: Path, size: int, enabled: bool):
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

        def advance(n: int, stream: BinaryIO) -> None:
            raw = getattr(stream, "fileobj", None)  # compressed bytes consumed, comparable to the file size
            if raw is not None:
                bar.update(task, completed=raw.tell())
            else:
                bar.advance(task, n)

        yield advance
