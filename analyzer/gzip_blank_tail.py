"""A gzip reader that leaves out the blanks after the last member, decoding the file once.

A newline that a text tool or a transfer appends to a .json.gz (``echo >> t.gz``) holds nothing, and the members
before it are whole and checked (their CRCs and sizes), yet GNU gzip and Python's gzip refuse the file: after a
member they read a new header, and whitespace is not one. Where the data ends cannot be told from the bytes (a
trailer may itself end in a whitespace byte: its size's top byte), but the decoder knows: each member's deflate
data ends where the decoder says (its unused data). So this reader decodes member after member itself, skips the
zeros gzip readers skip between them, and after the last one takes blanks (whitespace, zeros), however many, read
a piece at a time, as the end of the file; any other byte there is garbage, refused as gzip readers refuse it.
"""

from __future__ import annotations

import gzip
import io
import os
from typing import BinaryIO

from .json_blank_tail import BLANKS, content_end

try:
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is a dependency, but the analyzer must not need it
    import zlib as _zlib

READ_CHUNK = 8 << 20  # the buffered reader's own reads
PIECE_BYTES = 64 << 10  # compressed bytes read at a time
OUTPUT_BYTES = 96 << 10  # decompressed bytes taken from the decoder at a time: below glibc's mmap threshold (128 KiB)
GZIP_MAGIC = b"\x1f\x8b"


def ends_in_whitespace(fd: int) -> bool:
    """Whether the file open at ``fd`` ends in whitespace, zeros after it or not (which no gzip reader reads past;
    zeros alone they skip)."""
    end = content_end(fd, os.fstat(fd).st_size, b"\0")
    return end > 0 and os.pread(fd, 1, end - 1) in (b" ", b"\t", b"\r", b"\n")


class _Members(io.RawIOBase):
    """The decompressed bytes of the gzip members of ``raw``, one after another (see the module's text). The decoder
    gives its output in small pieces, below the size the allocator maps fresh memory for, so that their memory is
    reused, each copied once into the reader's buffer (a decoder's output cannot be written in place)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.decoder = _zlib.decompressobj(31)  # 31: one gzip member, header and trailer checked
        self.input = b""  # read from raw, not yet decoded
        self.output, self.taken = memoryview(b""), 0  # decoded, and how much of it readinto has handed out
        self.done = False

    def readable(self) -> bool:
        return True

    def readinto(self, target) -> int:
        with memoryview(target) as view:
            filled = 0
            while filled < len(view) and not self.done:
                if self.taken < len(self.output):
                    count = min(len(view) - filled, len(self.output) - self.taken)
                    view[filled : filled + count] = self.output[self.taken : self.taken + count]
                    filled, self.taken = filled + count, self.taken + count
                elif self.decoder.eof:
                    self._after_member(self.decoder.unused_data)
                else:
                    self.input = self.input or self.raw.read(PIECE_BYTES)
                    if not self.input:
                        raise EOFError("Compressed file ended before the end-of-stream marker was reached")
                    self.output, self.taken = memoryview(self.decoder.decompress(self.input, OUTPUT_BYTES)), 0
                    self.input = self.decoder.unconsumed_tail
            return filled

    def _after_member(self, rest: bytes) -> None:
        """Begin the next member of the bytes after the one just decoded (``rest``, then the file's), or end: at the
        file's end, or where only blanks follow."""
        rest = rest.lstrip(b"\0")  # zeros may pad a member (gzip readers skip them)
        while len(rest) < len(GZIP_MAGIC):
            more = self.raw.read(PIECE_BYTES)
            if not more:
                break
            rest = (rest + more).lstrip(b"\0")
        if rest.startswith(GZIP_MAGIC):
            self.decoder, self.input = _zlib.decompressobj(31), rest
            return
        while rest:
            if rest.strip(BLANKS):
                raise gzip.BadGzipFile("Not a gzipped file")  # garbage after the data (event_array names it)
            rest = self.raw.read(PIECE_BYTES)
        self.done = True


class BlankTailGzip(io.BufferedReader):
    """The decompressed bytes of the gzip file ``raw``, blanks after its last member left out; ``fileobj``: the
    file, whose position is how far the decoding has read (the progress bar's)."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__(_Members(raw), READ_CHUNK)
        self.fileobj = raw
