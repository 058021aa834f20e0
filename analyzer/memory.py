"""How much memory DuckDB may use for one trace, where it spills the rest, and how much it may spill.

The events table takes somewhat less memory than the trace's JSON, and the attribution's joins and aggregations
need more on top (benchmarks/RESULTS.md, "Memory limit"). Left alone, DuckDB would take up to 80% of RAM; a run is
instead given as much as its JSON (at least MIN_LIMIT, at most DuckDB's 80% of RAM), beyond which DuckDB spills
table blocks and operator state to its connection's scratch directory (connection.py): a trace larger than the
memory it is given still loads, a little slower. The process's peak is about that limit plus the interpreter and
its libraries: the limit is what keeps a large trace's peak within 1.25x its JSON. The spill is bounded too (the
disk limit, DuckDB's max_temp_directory_size: by default twice the JSON, at least MIN_DISK_LIMIT), and reading the
trace holds no more than these limits allow (reading_limits): a gzip bomb is refused, not loaded until the machine
gives out.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import NamedTuple

import duckdb

from .gzip_members import json_size as members_json_size
from .sql import execute, quote
from .trace_parts import CHUNK, UNLIMITED, Limits

MIN_LIMIT = 512 << 20
LIMIT_PER_JSON_BYTE = 1.0
RAM_SHARE = 0.8  # DuckDB's own default limit
BLOCK_REUSE_MIN_JSON = 512 << 20  # from here DuckDB keeps freed blocks for reuse (limit_memory)
# Kineto JSON compresses 10-20x at gzip level 3: ISIZE wraps past 4 GiB of JSON, which a gzip file of more
# than 4 GiB / GZIP_RATIO_MAX may have; then the wraps are added back until the ratio is GZIP_RATIO_FLOOR.
GZIP_RATIO_FLOOR, GZIP_RATIO_MAX = 8, 64
MIN_DISK_LIMIT = 4 << 30
DISK_LIMIT_PER_JSON_BYTE = 2
# the most JSON a trace may decompress to, per byte of memory and disk limit (a Kineto trace's events table is
# smaller than its JSON: twice the limits is more than a real trace can need, and bounds what a bomb costs)
JSON_PER_LIMIT_BYTE = 2
WHOLE_DOCUMENT_SHARE = 8  # a document parsed whole (orjson's objects: several times its bytes) of limit/8 at most
WHOLE_DOCUMENT_MIN = 64 << 20
PART_ROOM = 4 * CHUNK  # a streamed part may grow this far past its size before a cut is found
# the parts being read at once hold at most this share of the memory limit, outside DuckDB's (their bytes; the native
# reader's columns beside): with one part per thread a machine of many cores held far more (benchmarks/RESULTS.md)
IN_FLIGHT_SHARE = 1 / 5


def json_bytes(path: Path, compressed: bool) -> int:
    """The size of the trace's JSON: the file's, or for gzip the members' sizes where their headers say where each
    ends (gzip_members.py), else the trailer's ISIZE (the size mod 2**32; the last member's alone)."""
    size = path.stat().st_size
    if not compressed or size < 18:
        return size
    members = members_json_size(path)
    if members is not None:
        return members
    with open(path, "rb") as raw:
        raw.seek(-4, os.SEEK_END)
        isize = int.from_bytes(raw.read(4), "little")
    while GZIP_RATIO_MAX * size >= 1 << 32 and isize < GZIP_RATIO_FLOOR * size:
        isize += 1 << 32
    return isize


def default_memory_limit(json_size: int) -> int:
    """Bytes DuckDB may hold for a trace of ``json_size`` bytes of JSON."""
    limit = max(MIN_LIMIT, int(LIMIT_PER_JSON_BYTE * json_size))
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # not POSIX: DuckDB's default applies above this
        return limit
    return min(limit, int(RAM_SHARE * ram))


def default_disk_limit(json_size: int) -> int:
    """Bytes DuckDB may spill to its scratch directory for a trace of ``json_size`` bytes of JSON."""
    return max(MIN_DISK_LIMIT, DISK_LIMIT_PER_JSON_BYTE * json_size)


def limit_memory(
    con: duckdb.DuckDBPyConnection,
    limit: int | str,
    json_size: int = 0,
    disk_limit: int | str | None = None,
    now=None,
) -> tuple[str, str]:
    """Set ``con``'s memory limit (bytes, or DuckDB's '4GB') and the most it may spill to its spill directory
    (``disk_limit``; default_disk_limit); ``json_size``: the JSON the run will load, in bytes. ``now``: the instance's
    settings as the last run set them (connection.sized_settings), kept up to date: where they are the same, nothing
    is set. Setting memory_limit has DuckDB give its allocator's freed memory back to the system, which the next
    statements then fault in again: on a small trace that cost more than setting it (benchmarks/RESULTS.md).
    Returns the two limits as ``con`` now has them set (for settings_as_set)."""
    amount = f"{limit}B" if isinstance(limit, int) else limit
    disk = default_disk_limit(json_size) if disk_limit is None else disk_limit
    disk = f"{disk}B" if isinstance(disk, int) else disk
    if now is None or (now.memory_limit, now.disk_limit) != (amount, disk):
        if now is not None:
            now.memory_limit = now.disk_limit = None  # unknown, should a SET fail
        con.execute(f"SET memory_limit = {quote(amount)}")
        con.execute(f"SET max_temp_directory_size = {quote(disk)}")
        if now is not None:
            now.memory_limit, now.disk_limit = amount, disk
    if json_size >= BLOCK_REUSE_MIN_JSON:
        # Blocks freed by one statement serve the next instead of going back to the system, up to half the limit:
        # that saves most of the page faults while the peak RSS stays within the memory goal, where the whole limit
        # would not; on a small trace it costs more than it saves (benchmarks/RESULTS.md, "Freed blocks kept").
        # What it held stays with the run until it is closed. (A database file opened twice in a process shares
        # one instance, whose setting cannot be lowered.)
        held = memory_bytes(limit)
        if held is not None:
            with contextlib.suppress(duckdb.InvalidInputException):
                con.execute(f"SET block_allocator_memory = {quote(f'{held // 2}B')}")
    return amount, disk


def memory_bytes(limit: int | str) -> int | None:
    """A memory amount as bytes: an int, or DuckDB's '4GB' / '1.5GiB' / '512MB'; None for another form ('80%')."""
    if isinstance(limit, int):
        return limit
    match = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?i?B)\s*", limit, re.IGNORECASE)
    if match is None:
        return None
    unit = match.group(2).upper()
    base = 1024 if "I" in unit else 1000
    return int(float(match.group(1)) * base ** "BKMGT".index(unit[0]))


class Settings(NamedTuple):
    """The settings of a connection that reading a trace into it goes by, as DuckDB shows them."""

    threads: int
    memory_limit: str
    disk_limit: str  # max_temp_directory_size


def read_settings(con: duckdb.DuckDBPyConnection) -> Settings:
    """``con``'s Settings, in one query (each statement costs a small trace's load a fixed part of a millisecond)."""
    query = (
        "SELECT current_setting('threads'), current_setting('memory_limit'), current_setting('max_temp_directory_size')"
    )
    threads, memory, disk = execute(con, query).fetchone()
    return Settings(int(threads), memory, disk)


MAX_SHOWN = 64  # the limits whose display is kept: a process's runs set a few (small traces all the same two)
# DuckDB's display of the memory and disk limits as set (limit_memory), by the values set: read once per process
_shown: dict[tuple[str, str], tuple[str, str]] = {}


def settings_as_set(con: duckdb.DuckDBPyConnection, threads: int, limits: tuple[str, str]) -> Settings:
    """``con``'s Settings where it has ``threads`` threads and ``limits`` (limit_memory's), as read_settings reads
    them: read once for each pair of limits, then known (its SELECT cost a small trace's load ~0.6 ms)."""
    shown = _shown.get(limits)
    if shown is None:
        settings = read_settings(con)
        if len(_shown) < MAX_SHOWN:
            _shown[limits] = (settings.memory_limit, settings.disk_limit)
        return settings
    return Settings(threads, *shown)


def in_flight_bytes(settings: Settings) -> int:
    """How many bytes of parts the ingest may have read or handed out at once (IN_FLIGHT_SHARE of the memory
    limit; UNLIMITED where the limit is not an amount)."""
    memory = memory_bytes(settings.memory_limit)
    return UNLIMITED if memory is None else int(IN_FLIGHT_SHARE * memory)


def reading_limits(settings: Settings, parts_in_memory: int) -> Limits:
    """What reading a trace into a connection of ``settings`` may hold (trace_parts.Limits), from its memory and disk
    limits, with at most ``parts_in_memory`` streamed parts in memory at once."""
    memory_setting, disk_setting = settings.memory_limit, settings.disk_limit
    memory, disk = memory_bytes(memory_setting), memory_bytes(disk_setting)
    if memory is None:
        return Limits(memory=memory_setting, disk=disk_setting)
    return Limits(
        max_part_bytes=max(memory // max(parts_in_memory, 1), PART_ROOM),
        max_json_bytes=UNLIMITED if disk is None else JSON_PER_LIMIT_BYTE * (memory + disk),
        whole_document_bytes=max(WHOLE_DOCUMENT_MIN, memory // WHOLE_DOCUMENT_SHARE),
        memory=memory_setting,
        disk=disk_setting,
    )
