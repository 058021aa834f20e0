"""Parquet files whose footer lies, made by rewriting the footer's bytes: what no writer's API makes (a writer
counts the rows it writes). Used by tests/test_archive_verify.py and benchmarks/hostile_inputs_runs.py."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow.parquet as pq


def row_count_lie(part: Path) -> None:
    """The footer's row counts (FileMetaData, its row group's and every column chunk's) said 1000 times larger: each
    a zigzag varint in the thrift footer, rewritten with the footer's length."""
    data = bytearray(part.read_bytes())
    footer_length = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - footer_length
    rows = pq.ParquetFile(part).metadata.num_rows

    def varint(value: int) -> bytes:
        value, out = value << 1, bytearray()  # zigzag of a non-negative number
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        return bytes([*out, value])

    footer = bytes(data[start:-8]).replace(b"\x16" + varint(rows), b"\x16" + varint(rows * 1000))
    footer = footer.replace(b"\x26" + varint(rows), b"\x26" + varint(rows * 1000))  # a field 2 ahead (delta 2)
    data[start:] = footer + len(footer).to_bytes(4, "little") + b"PAR1"
    part.write_bytes(bytes(data))


def statistics_lie(part: Path, value: float, said: float) -> int:
    """The footer's statistics (min, max and their deprecated twins) of a DOUBLE column that hold ``value`` say
    ``said`` instead: its 8 bytes replaced in the thrift footer, whose length stays. Returns how many were."""
    data = bytearray(part.read_bytes())
    footer_length = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - footer_length
    footer = bytes(data[start:-8])
    found = footer.count(struct.pack("<d", value))
    data[start:-8] = footer.replace(struct.pack("<d", value), struct.pack("<d", said))
    part.write_bytes(bytes(data))
    return found
