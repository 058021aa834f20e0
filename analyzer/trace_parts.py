"""A part of a trace's ``traceEvents`` array: consecutive events that load together (event_array.py cuts them).

A part is a file holding a JSON array; or a range of a plain trace, its events alone (``{…},{…}``), mapped
only while a reader reads them; or a decompressed stream's array in memory (streamed_parts.py). Either of the
last two is written to the part file only when a reader needs a file.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import orjson

from .errors import OUT_OF_MEMORY, BadInputError
from .json_text import Leniencies, loads_readable, readable_text

if TYPE_CHECKING:
    from .streamed_parts import Buffers

CHUNK = 8 << 20
TAIL_KEEP = 1 << 20
ENDS_EARLY = "the JSON ends before the trace object is complete (truncated or corrupt)"
# JSON says nothing of a key given twice: readers keep the first value or the last, and a trace keeps its events in one
TWO_ARRAYS = (
    'has two traceEvents arrays (the key "traceEvents" twice in the trace object): which is the trace is not known'
)
SEARCH_OVERLAP = 64  # a boundary the last search could not see whole starts at most this far before its end
# between two events: the end of one object, a comma, the start of the next one's first key (a match
# inside a string or a nested value is possible, never silent: the part is then not valid JSON)
BOUNDARY = re.compile(rb'\}\s*,\s*(?=\{\s*")')
TRUNCATED_WHILE_READ = "was truncated while it was read (is it still being written?)"
UNLIMITED = 1 << 62


@dataclass(frozen=True)
class Limits:
    """What reading one trace may hold, from the run's memory and disk limits (memory.py): a part in memory
    (``max_part_bytes``: a stretch of traceEvents with no place to cut it, one huge event or blanks, cannot grow
    past it), the JSON a compressed trace decompresses to (``max_json_bytes``: more would not fit in the memory and
    the disk given, a gzip bomb), and a document parsed whole (``whole_document_bytes``). ``memory`` and ``disk``:
    the limits as the messages name them."""

    max_part_bytes: int = UNLIMITED
    max_json_bytes: int = UNLIMITED
    whole_document_bytes: int = UNLIMITED
    memory: str = "none"
    disk: str = "none"

    def part_refusal(self) -> str:
        return (
            f"holds more than {_mib(self.max_part_bytes)} of traceEvents with no place between two events to cut it"
            f" (one event, or blanks, that large), more than the memory limit ({self.memory}) allows"
        )

    def json_refusal(self) -> str:
        return (
            f"decompresses to more than {_mib(self.max_json_bytes)} of JSON, more than the memory limit ({self.memory})"
            f" and the disk limit ({self.disk}) can load"
        )

    def whole_document_refusal(self) -> str:
        return (
            f"has no traceEvents where a Kineto trace has it, and is larger than {_mib(self.whole_document_bytes)}"
            f", too large to parse whole within the memory limit ({self.memory})"
        )


def unreadable(path: str | os.PathLike, exc: OSError) -> BadInputError:
    """The trace at ``path`` could not be read after it was opened and cut: it vanished, became unreadable, or its
    device failed (EIO). Said of the trace, as the parts are read from it by name on the loading threads; a map that
    failed for memory (ENOMEM) is not the file's failure."""
    if exc.errno == errno.ENOMEM:
        return BadInputError(path, OUT_OF_MEMORY)
    return BadInputError(path, read_failure(exc.strerror or str(exc)))


def read_failure(cause: str) -> str:
    return f"could not be read while it was loaded ({cause})"


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.0f} MiB"


@dataclass
class Part:
    """One part of the ``traceEvents`` array: a part file holding a JSON array of consecutive events; or, for a
    plain trace read in place, bytes ``[first, last)`` of the trace: those events alone (``{…},{…}``), mapped
    only while a reader reads them (so they leave memory with it); or, for a decompressed stream read in
    place, the array in memory (``data``; the events alone where ``bare``, for a part of gzip members). Either of
    the last two is written to the part file only when a reader needs a file."""

    index: int
    file: str
    source: Path | None = None
    first: int = 0
    last: int = 0
    data: memoryview | None = None  # a streamed part kept in memory: its JSON array, until read
    buffers: Buffers | None = None  # where data's memory goes back once read
    bare: bool = False  # data holds the events alone ({…},{…}), not an array (a part of gzip members)
    at: int | None = None  # where the part file's first byte stands in the JSON (part 0's: the array's "["), or None

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
            yield self.data, self.bare
            return
        path, first, last = (self.source, self.first, self.last) if self.source is not None else (self.file, 0, None)
        with ExitStack() as opened:
            try:  # the trace itself, reopened by name: it may have gone or failed since it was cut
                raw = opened.enter_context(open(path, "rb"))
                size = os.fstat(raw.fileno()).st_size
                last = size if last is None else last
                mapped = None
                if first < last <= size:
                    start = first - first % mmap.ALLOCATIONGRANULARITY
                    mapping = mmap.mmap(raw.fileno(), last - start, access=mmap.ACCESS_READ, offset=start)
                    mapped = opened.enter_context(mapping)
            except OSError as exc:
                if self.source is None:
                    raise
                raise unreadable(self.source, exc) from None
            if last <= first:
                yield b"", self.source is not None
                return
            if last > size:  # shorter than when it was cut
                raise BadInputError(path, TRUNCATED_WHILE_READ)
            view = memoryview(mapped)[first - start :]
            try:
                yield view, self.source is not None
            finally:
                view.release()

    def as_file(self) -> str:
        if self.data is not None and not os.path.exists(self.file):
            with open_part_file(self.file) as out:
                out.write(b"[" if self.bare else b"")
                out.write(self.data)
                out.write(b"]" if self.bare else b"")
        if self.source is not None and not os.path.exists(self.file):
            try:
                raw = open(self.source, "rb")
            except OSError as exc:
                raise unreadable(self.source, exc) from None
            with raw, open_part_file(self.file, buffering=0) as out:
                out.write(b"[")
                copy_range(self.source, raw.fileno(), out, self.first, self.last - self.first)
                out.write(b"]")
        return self.file


Advance = Callable[[int, BinaryIO], None]
OnPart = Callable[[int, Part], None]


class CutFailed(Exception):
    """The cuts did not fall between events; read the array again as one part."""


def part_file(scratch: str, index: int) -> str:
    return os.path.join(scratch, f"events-{index:05d}.json")


class ScratchUnavailable(OSError):
    """The scratch folder could not be made: TMPDIR's fault, not the trace's."""


@contextmanager
def scratch_folder() -> Iterator[str]:
    """The path of a new folder in TMPDIR for the part files of one load, made only when the first is written
    (open_part_file) and removed with what it holds after the block: most loads write none (the native reader reads
    the parts in place), and a folder made and removed cost a small trace's load ~0.6 ms. Its name is random, so
    that nobody can make it first."""
    folder = os.path.join(tempfile.gettempdir(), f"kernelscope-{secrets.token_hex(8)}")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def open_part_file(file: str, buffering: int = -1) -> BinaryIO:
    """The part file ``file`` (part_file) opened for writing, its scratch folder (scratch_folder) made first."""
    folder = os.path.dirname(file)
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        problem = f"{exc.strerror or exc} (making a scratch folder to cut the trace into parts; TMPDIR names another)"
        raise ScratchUnavailable(exc.errno, problem, folder) from None
    return open(file, "wb", buffering=buffering)


def find_array_end(
    path: Path,
    tail: bytes,
    tail_at: int | None = None,
    decompressed: bool = False,
    leniencies: Leniencies | None = None,
) -> tuple[int, dict]:
    """Offset just past the array's closing ``]`` in ``tail``, and the keys that follow it (read leniently:
    json_text.loads_readable, counted in ``leniencies``). Where no ``]`` ends a trace object, but one does that text
    follows (``tail_at``: where ``tail`` begins in the JSON, which a gzip trace ``decompressed`` to), that text is
    named with its offset; else the JSON ends early."""
    searched = tail  # where a "]" ends the object is where it ends in tail: searched keeps tail's length
    pos = tail.rfind(b"]")
    while pos != -1:
        try:
            _loads_after(searched, pos + 1)
            keys = loads_readable(_KEYS_START + tail[pos + 1 :])
        except orjson.JSONDecodeError as exc:
            if searched is tail and exc.msg.startswith(_LENIENT_FAULTS):
                searched = _blanked(tail)
                continue
            pos = tail.rfind(b"]", 0, pos)
            continue
        if isinstance(keys, dict):
            if (
                b'"traceEvents"' in tail[pos + 1 :]
                and top_level_keys(_KEYS_START + tail[pos + 1 :]).count("traceEvents") > 1
            ):
                raise BadInputError(path, TWO_ARRAYS)
            keys.pop("traceEvents", None)
            if leniencies is not None:  # counted once, for the "]" that ends the array
                leniencies.add(readable_text(tail[pos + 1 :]))
            return pos + 1, keys
        break
    after = None if tail_at is None else _text_after(tail)
    if after is not None:
        where = f"byte {tail_at + after}{' of the JSON it decompresses to' if decompressed else ''}"
        raise BadInputError(path, f"is not valid JSON (trailing data at {where}, after the trace object)")
    raise BadInputError(path, ENDS_EARLY)


def _loads_after(tail: bytes, start: int) -> None:
    """Parse a trace object whose array ended just before ``tail[start:]``: raise the JSONDecodeError that parsing
    all of it would, or nothing where it closes the object. Read in growing windows: the first fault after a "]"
    inside an event is a few bytes on, and reading all that follows each of a tail's thousands of "]"s made the
    search of a truncated trace quadratic (many seconds on 1 MiB)."""
    window = 128
    while True:
        end = min(len(tail), start + window)
        while end < len(tail) and tail[end] & 0xC0 == 0x80:  # a window ends where a character does
            end -= 1
        try:
            orjson.loads(_KEYS_START + tail[start:end])
        except orjson.JSONDecodeError as exc:  # a fault within the window is the whole text's
            if end == len(tail) or exc.msg != "unexpected end of data":
                raise
            window *= 8
            continue
        if end < len(tail):  # the window closed the object: what follows it decides
            orjson.loads(_KEYS_START + tail[start:])
        return


# orjson's faults that loads_readable reads past
_LENIENT_FAULTS = ("str is not valid UTF-8", "unexpected control character", "invalid high", "no low", "invalid low")
_CONTROLS_AS_SPACES = bytes.maketrans(bytes(range(32)), b" " * 32)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD](?=[89a-fA-F])")  # made an escape of another character, as long


def _blanked(tail: bytes) -> bytes:
    """``tail`` with each byte that is not UTF-8 as "?", each control character as a space and each surrogate's escape
    one of another character, byte for byte: what
    the object's end is searched in where the tail needs json_text's leniencies (found once, not at each "]")."""
    text = tail.decode("utf-8", "surrogateescape")
    return _SURROGATE_ESCAPE.sub(rb"\\u0", _ESCAPED_BYTE.sub("?", text).encode().translate(_CONTROLS_AS_SPACES))


def top_level_keys(document: bytes) -> list[str]:
    """The keys of the JSON object ``document``, each as often as it is given (a parsed object keeps one)."""
    pairs: list = []
    text = document.decode("utf-8", "replace")  # read as loads_readable reads it
    json.loads(text, strict=False, object_pairs_hook=lambda found: pairs.append(found) or dict(found))
    return [key for key, _ in pairs[-1]]  # the outermost object's hook runs last


_KEYS_START = b'{"traceEvents":[]'
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")  # what surrogateescape decodes a byte that is not UTF-8 to


def _text_after(tail: bytes) -> int | None:
    """Where in ``tail`` text begins that follows a trace object ended by one of its ``]`` (the last such), or None.
    Bytes that are not UTF-8 read as '?', so that the garbage may hold them. Text that could go on a JSON value
    (``,`` ``}`` ``]``) follows no trace object: that ``]`` closed an array inside an event of a trace cut short."""
    text = tail.decode("utf-8", "surrogateescape")  # one character for each byte that is not UTF-8
    data = _ESCAPED_BYTE.sub("?", text).encode()  # as long as tail, byte for byte
    pos = data.rfind(b"]")
    while pos != -1:
        try:
            _loads_after(data, pos + 1)
        except orjson.JSONDecodeError as exc:
            if exc.msg == "unexpected content after document":
                start = pos + 1 + len(data[pos + 1 :].decode()[: exc.pos - len(_KEYS_START)].encode())
                start += len(data[start:]) - len(data[start:].lstrip())
                if data[start : start + 1] not in (b",", b"}", b"]"):
                    return start
        pos = data.rfind(b"]", 0, pos)
    return None


def copy_range(path: Path, fd: int, out: BinaryIO, offset: int, count: int) -> None:
    """Copy ``count`` bytes at ``offset`` of ``fd`` (the file at ``path``) to ``out``: in the kernel where it can,
    else by chunks."""
    while count:
        try:
            n = os.copy_file_range(fd, out.fileno(), count, offset)
        except (AttributeError, OSError):  # not Linux, or a file system that cannot (or a failed read: tried again)
            try:
                data = os.pread(fd, min(count, CHUNK), offset)
            except OSError as exc:  # the trace's own read failed; a failed write (a full disk) is not its fault
                raise unreadable(path, exc) from None
            n = out.write(data)
        if not n:
            raise BadInputError(path, TRUNCATED_WHILE_READ)
        offset += n
        count -= n
