"""Blanks after a trace's JSON, in any amount: found without reading the trace whole, held out of memory.

Writers leave blanks after the document: a newline or many (a text tool, a transfer), and zeros where a file was
reserved larger than what was written into it (preallocated, or a writer that stopped before truncating it). None
of them changes the trace, so they are left out (docs/errors.md), however many there are. A plain file's are found
from its end (``content_end``); a stream's (a decompressed trace) cannot be, so ``HeldBlanks`` holds every long run of
blanks back, compressed, until a byte that is not blank follows it (then the run is handed out as it was: it was
inside the document) or the stream ends (then it is dropped). Anything else after the document stays an error.
"""

from __future__ import annotations

import io
import os
import zlib
from typing import BinaryIO

BLANKS = b" \t\r\n\0"  # JSON's whitespace, and the zeros of space reserved but never written
FIRST_SCAN_BYTES = 64 << 10  # a plain file's end is read back in windows from this size, growing
MAX_SCAN_BYTES = 8 << 20
HOLD_FROM = 1 << 20  # a run of blanks longer than this is held back; shorter runs pass as they come
MAX_HELD_BYTES = 64 << 20  # a held run compressed to more (random blanks) is handed out as it comes instead
READ_BYTES = 8 << 20


def content_end(fd: int, end: int, blanks: bytes = BLANKS) -> int:
    """The offset just past the last byte before ``end`` of the file open at ``fd`` that is not one of ``blanks``
    (0: none), reading back from ``end`` in growing windows (a newline or two is the usual tail)."""
    window = FIRST_SCAN_BYTES
    while end > 0:
        start = max(0, end - window)
        kept = len(os.pread(fd, end - start, start).rstrip(blanks))
        if kept:
            return start + kept
        end, window = start, min(window * 4, MAX_SCAN_BYTES)
    return 0


def trailing_blanks(data) -> int:
    """How many bytes at the end of ``data`` (bytes or a buffer) are blanks."""
    with memoryview(data) as view:
        end, window = len(view), 64
        while end > 0:
            start = max(0, end - window)
            kept = len(bytes(view[start:end]).rstrip(BLANKS))
            if kept:
                return len(view) - start - kept
            end, window = start, min(window * 16, MAX_SCAN_BYTES)
    return len(data)


def last_word(data: bytes) -> int:
    """How many bytes at the end of ``data`` hold no blank: its last word, where text follows a document."""
    return len(data) - max(data.rfind(bytes([blank])) for blank in BLANKS) - 1


def read_by_pieces(readinto, size: int, piece_bytes: int) -> bytes:
    """Up to ``size`` bytes (all that is left for -1) from ``readinto``, a piece at a time: a size past what is left (a
    whole-document read up to a limit) allocates no more than what is read."""
    out = bytearray()
    while size < 0 or len(out) < size:
        piece = bytearray(piece_bytes if size < 0 else min(piece_bytes, size - len(out)))
        count = readinto(piece)
        if not count:
            break
        out += memoryview(piece)[:count]
    return bytes(out)


class HeldBlanks(io.RawIOBase):
    """``stream``'s bytes, each run of more than HOLD_FROM blanks held back (compressed) until a byte that is not
    blank follows it, dropped where the stream ends: the blanks after a document take no memory, and what a part
    holds ends where the document does. ``fileobj`` and ``fileno`` are the stream's (the progress bar's)."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        inner = getattr(stream, "_buffer", None)  # a gzip reader's own buffered reader reads straight into a target
        self.reader = inner if isinstance(inner, io.BufferedReader) else stream
        self.fileobj = getattr(stream, "fileobj", None)
        self.run = 0  # blank bytes at the end of what was read, held or handed out
        self.held = None  # the run held back, as zlib compresses it (a compressobj), or None
        self.held_parts: list[bytes] = []
        self.held_bytes = 0
        self.replay = None  # a held run being handed out (a decompressobj), and what of it is left
        self.replay_input = b""
        self.pending = b""  # bytes read after a held run, handed out once the run is
        self.dropped = 0  # blanks left out at the end
        self.passing = False  # the run compressed to more than MAX_HELD_BYTES: it passes as it comes

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.stream.fileno()

    def read(self, size: int = -1) -> bytes:
        return read_by_pieces(self.readinto, size, READ_BYTES)

    def readinto(self, target) -> int:
        with memoryview(target) as view:
            while True:
                if self.replay is not None:
                    return self._replay_into(view)
                if self.pending:
                    count = min(len(view), len(self.pending))
                    view[:count] = self.pending[:count]
                    self.pending = self.pending[count:]
                    return count
                count = self.reader.readinto(view)
                if not count:
                    if self.held is not None:  # the stream ends in the run: blanks after the document
                        self.dropped += self.held_bytes
                        self.held, self.held_parts, self.held_bytes = None, [], 0
                    return 0
                blank = trailing_blanks(view[:count])
                self.run = self.run + count if blank == count else blank
                self.passing = self.passing and blank == count
                if self.held is not None:
                    if blank == count:
                        if not self._hold(view[:count]):
                            self.passing = True
                            self._start_replay()
                        continue
                    self.pending = bytes(view[:count])  # handed out after the run, which was inside the document
                    self._start_replay()
                    continue
                if self.run > HOLD_FROM and blank and not self.passing:
                    self.held = zlib.compressobj(1)
                    self._hold(view[count - blank : count])
                    if count > blank:
                        return count - blank
                    continue
                return count

    def _hold(self, data) -> bool:
        """Hold ``data`` back with the run; False where the run would take more than MAX_HELD_BYTES."""
        self.held_parts.append(self.held.compress(data))
        self.held_bytes += len(data)
        return sum(map(len, self.held_parts)) <= MAX_HELD_BYTES

    def _start_replay(self) -> None:
        self.held_parts.append(self.held.flush())
        self.replay, self.replay_input = zlib.decompressobj(), b"".join(self.held_parts)
        self.held, self.held_parts, self.held_bytes = None, [], 0

    def _replay_into(self, view: memoryview) -> int:
        piece = self.replay.decompress(self.replay_input, len(view))
        self.replay_input = self.replay.unconsumed_tail
        if self.replay.eof or not (piece or self.replay_input):
            self.replay = None
        if not piece:
            return self.readinto(view)
        view[: len(piece)] = piece
        return len(piece)
