"""Gzip files of several members that say where each member ends, and their decompression in parallel.

A gzip stream cannot be split: a member's deflate data must be decoded from its start, on one thread. But a gzip
file may hold several members one after another (RFC 1952, 2.2; every gzip reader reads them as one stream), and
each can be decoded on its own thread once its offset is known. The recorder writes its trace.json.gz so
(``write_members``): a member per MEMBER_BYTES of JSON, each of whose headers holds, in an extra field (FEXTRA,
subfield ``KS``), the member's own length in bytes, header to trailer, as BGZF's ``BC`` subfield does. The reader
(``gzip_members``) walks those headers, one read each, and where the chain ends exactly at the end of the file,
``MemberStream`` decodes members ahead of the reader on several threads (ISA-L's igzip, which drops the GIL) into
reused buffers. Anything else (one member, members without the field, a chain that does not end where the file
does) is read as one stream, as before (event_array.open_trace).

A member is trusted for nothing: its output may be at most the size its trailer says (ISIZE), which bounds what a
member may decompress to (a gzip bomb stops there), and its CRC and size are checked by the decoder.
"""

from __future__ import annotations

import mmap
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .errors import BadInputError
from .json_blank_tail import BLANKS, content_end, read_by_pieces
from .streamed_parts import Buffers
from .trace_parts import TRUNCATED_WHILE_READ

try:
    from isal import isal_zlib as _zlib
    from isal.isal_zlib import _GzipReader
except ImportError:  # pragma: no cover - isal is a dependency, but the analyzer must not need it
    import zlib as _zlib

    _GzipReader = None

MEMBER_BYTES = 32 << 20  # JSON per member: the ingest's part size while decompressing (ingest.STREAM_PART_BYTES)
MAX_MEMBER_BYTES = 256 << 20  # a member said to decompress to more is not decoded ahead: the file is read as a stream
# nor one said to decompress to more than this many times its length (Kineto's JSON: 10-20x): what the members say
# sizes the run's memory and disk limits (memory.json_bytes), which a small file must not make unbounded
MAX_RATIO = 64
READ_CHUNK = 8 << 20
SLACK_BYTES = 1 << 20  # room after a member's bytes in its buffer, for the end of its last event (next member's)
# header: magic, CM deflate, FLG FEXTRA alone, MTIME 0, XFL 0, OS 255 (unknown); XLEN 12; subfield "KS", 8 bytes
_HEADER_START = b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff"
_EXTRA = b"\x0c\x00KS\x08\x00"
HEADER_BYTES = len(_HEADER_START) + len(_EXTRA) + 8
TRAILER_BYTES = 8  # CRC32, ISIZE


@dataclass(frozen=True)
class Member:
    offset: int  # of its header in the file
    length: int  # header to trailer
    size: int  # what it decompresses to (its trailer's ISIZE)


class MemberWriter:
    """A gzip file written as members of ``member_bytes`` of input each (the last one shorter; one empty member
    where nothing was written), each header holding the member's length (see the module's text). ``close()``
    ends the last member; ``target`` stays open."""

    def __init__(self, target: BinaryIO, level: int, member_bytes: int = MEMBER_BYTES) -> None:
        self.target, self.level, self.member_bytes = target, level, member_bytes
        self.members = 0
        self._start()

    def _start(self) -> None:
        self.compressor = _zlib.compressobj(self.level, _zlib.DEFLATED, -15)  # raw deflate: the header is ours
        self.pieces: list[bytes] = []
        self.crc = self.size = 0

    def write(self, data) -> None:
        with memoryview(data) as view:
            while len(view):
                piece = view[: self.member_bytes - self.size]
                self.pieces.append(self.compressor.compress(piece))
                self.crc = _zlib.crc32(piece, self.crc)
                self.size += len(piece)
                view = view[len(piece) :]
                if self.size == self.member_bytes:
                    self._end()

    def _end(self) -> None:
        self.pieces.append(self.compressor.flush())
        length = HEADER_BYTES + sum(map(len, self.pieces)) + TRAILER_BYTES
        self.target.write(_HEADER_START + _EXTRA + length.to_bytes(8, "little"))
        for piece in self.pieces:
            self.target.write(piece)
        self.target.write(self.crc.to_bytes(4, "little") + (self.size & 0xFFFFFFFF).to_bytes(4, "little"))
        self.members += 1
        self._start()

    def close(self) -> None:
        if self.size or not self.members:
            self._end()

    def __enter__(self) -> MemberWriter:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()


def write_members(source: BinaryIO, target: BinaryIO, level: int, member_bytes: int = MEMBER_BYTES) -> None:
    """Compress ``source`` into ``target`` as a gzip file of indexed members (MemberWriter)."""
    with MemberWriter(target, level, member_bytes) as writer:
        while data := source.read(READ_CHUNK):
            writer.write(data)


def gzip_members(fd: int) -> list[Member] | None:
    """The members of the gzip file open at ``fd``, where each header says its length (write_members) and they end
    exactly at the end of the file, or where only blanks follow (gzip_blank_tail: a newline appended); else None (the
    file is then read as one stream)."""
    size = os.fstat(fd).st_size
    members, offset = [], 0
    while offset < size:
        header = os.pread(fd, HEADER_BYTES, offset)
        if len(header) < HEADER_BYTES or not header.startswith(_HEADER_START[:4]) or header[10:16] != _EXTRA:
            return members if members and content_end(fd, size) <= offset else None
        length = int.from_bytes(header[16:], "little")
        if length < HEADER_BYTES + TRAILER_BYTES or offset + length > size:
            return None
        isize = int.from_bytes(os.pread(fd, 4, offset + length - 4), "little")
        if isize > min(MAX_MEMBER_BYTES, MAX_RATIO * length):
            return None
        members.append(Member(offset, length, isize))
        offset += length
    return members if members else None


def bytes_after_members(fd: int) -> tuple[int, bytes] | None:
    """Where the gzip members of the file open at ``fd`` end and the first (up to 9) bytes that follow them, when
    those are not another member (garbage appended, even a byte of it: the readers say only that the data ended
    early, or that it is not gzip); None where every member is whole and nothing follows but the zeros readers
    skip, or a member itself is cut short or corrupt. Called on the error path only: it decompresses the file
    again."""
    size, offset = os.fstat(fd).st_size, 0
    while True:
        decoder, position = _zlib.decompressobj(31), offset  # 31: one gzip member, header and trailer checked
        try:
            while not decoder.eof:
                chunk = os.pread(fd, READ_CHUNK, position)
                if not chunk:
                    return None  # the member is cut short
                position += len(chunk)
                while chunk and not decoder.eof:  # the output is dropped, at most READ_CHUNK at a time
                    decoder.decompress(chunk, READ_CHUNK)
                    chunk = decoder.unconsumed_tail
        except _zlib.error:
            return None
        offset = position - len(decoder.unused_data)
        while offset < size and (zeros := os.pread(fd, READ_CHUNK, offset)).strip(b"\0") == b"":
            offset += len(zeros)  # gzip readers skip zeros padding a member (GNU gzip too)
        if offset >= size:
            return None
        offset += len(zeros) - len(zeros.lstrip(b"\0"))
        following = os.pread(fd, 9, offset)
        if not following.startswith(_HEADER_START[:2]) or size - offset < 18:  # 18: a header and a trailer
            return _after_blanks(fd, offset, size)


def _after_blanks(fd: int, offset: int, size: int) -> tuple[int, bytes] | None:
    """Where the first byte after ``offset`` that is not a blank stands, and the (up to 9) bytes from it: the garbage
    that blanks after the last member hide (blanks alone are no garbage: gzip_blank_tail.py reads past them); the
    bytes at ``offset`` where no blank begins there or where the file holds nothing else."""
    start = offset
    while start < size and not (piece := os.pread(fd, READ_CHUNK, start)).strip(BLANKS):
        start += len(piece)
    if start >= size:
        return None
    start += len(piece) - len(piece.lstrip(BLANKS))
    return start, os.pread(fd, 9, start)


def json_size(path: Path) -> int | None:
    """What the gzip file at ``path`` decompresses to, from its members' trailers (None: not such a file)."""
    with open(path, "rb") as raw:
        members = gzip_members(raw.fileno())
    return None if members is None else sum(m.size for m in members)


class _Compressed:
    """What the progress bar reads of a MemberStream: how far into the file the bytes handed out come from."""

    def __init__(self) -> None:
        self.offset = 0

    def tell(self) -> int:
        return self.offset


class MemberStream:
    """The decompressed bytes of a file's members (gzip_members), in order, decoded up to ``ahead`` members ahead of
    the reader on as many threads, each into a buffer of its own (``buffers``, reused). Read as a stream (read,
    readinto: copies), or member by member (take_current, take_next: the buffers themselves, given back to
    ``buffers`` by whoever took them). ``close()`` waits for the threads."""

    def __init__(self, path: Path, raw: BinaryIO, members: list[Member], ahead: int) -> None:
        self.path = path
        self.fd = raw.fileno()
        self.members = members
        self.fileobj = _Compressed()
        self.ahead = max(1, ahead)
        self.buffers = Buffers(max(m.size for m in members) + SLACK_BYTES)
        self.pool = ThreadPoolExecutor(self.ahead, thread_name_prefix="kernelscope-gunzip")
        self.pending: deque[tuple[Member, Future]] = deque()
        self.next = 0  # the next member to hand to a thread
        self.taken = 0  # members taken off the queue
        self.current: mmap.mmap | None = None  # the member being read as a stream, and where
        self.position = self.end = 0
        self.closed = False
        for _ in range(self.ahead):
            self._submit()

    def _submit(self) -> None:
        if self.next < len(self.members):
            member = self.members[self.next]
            self.next += 1
            self.pending.append((member, self.pool.submit(self._decode, member)))

    def _decode(self, member: Member) -> mmap.mmap:
        """Decompress ``member`` into a buffer, reading at most one byte more than its trailer says: that byte
        there, it decompressed to more (corrupt), found before any more is decoded."""
        buffer = self.buffers.take()
        try:
            data = os.pread(self.fd, member.length, member.offset)  # not mapped: a file cut short under a map faults
            if len(data) < member.length:
                raise BadInputError(self.path, TRUNCATED_WHILE_READ)
            reader, filled = _GzipReader(data), 0
            with memoryview(buffer) as out:
                while filled <= member.size:
                    with out[filled : member.size + 1] as target:
                        count = reader.readinto(target)
                    if not count:
                        break
                    filled += count
            if filled != member.size:
                raise BadInputError(
                    self.path,
                    f"cannot be decompressed (its gzip member at byte {member.offset} holds "
                    f"{'more' if filled > member.size else 'fewer'} bytes than its trailer says: corrupt)",
                )
        except BaseException:
            self.buffers.give(buffer)
            raise
        return buffer

    def take_next(self) -> tuple[mmap.mmap, int] | None:
        """The next member's buffer and size (None after the last): the caller gives the buffer back."""
        if not self.pending:
            return None
        member, decoded = self.pending.popleft()
        self._submit()
        buffer = decoded.result()
        self.taken += 1
        self.fileobj.offset = member.offset + member.length
        return buffer, member.size

    def take_current(self) -> tuple[mmap.mmap, int, int] | None:
        """The first member's buffer, its size, and how much of it was read as a stream, where nothing past it has
        been read (else None); the caller gives the buffer back."""
        if self.taken != 1 or self.current is None:
            return None
        taken = self.current, self.end, self.position
        self.current, self.position, self.end = None, 0, 0
        return taken

    def readinto(self, target) -> int:
        """Copy the next decompressed bytes into ``target``; how many (0 at the end)."""
        with memoryview(target) as view:
            while self.position == self.end:
                if self.current is not None:
                    self.buffers.give(self.current)
                    self.current = None
                taken = self.take_next()
                if taken is None:
                    return 0
                (self.current, self.end), self.position = taken, 0
            count = min(len(view), self.end - self.position)
            with memoryview(self.current) as source:  # an mmap's own slice would be a copy, in new memory
                view[:count] = source[self.position : self.position + count]
            self.position += count
            return count

    def read(self, size: int = -1) -> bytes:
        return read_by_pieces(self.readinto, size, READ_CHUNK)

    def close(self) -> None:
        """Stop decoding (waits for the members being decoded) and give back the buffers it holds."""
        if self.closed:
            return
        self.closed = True
        for _, decoded in self.pending:
            decoded.cancel()
        self.pool.shutdown(wait=True)  # no thread writes into a buffer once this returns
        for _, decoded in self.pending:
            if decoded.done() and not decoded.cancelled() and decoded.exception() is None:
                self.buffers.give(decoded.result())
        if self.current is not None:
            self.buffers.give(self.current)
        self.current, self.pending = None, deque()

    def __enter__(self) -> MemberStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
