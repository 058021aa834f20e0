"""Load a Kineto/Chrome trace (``.json`` or ``.json.gz``) into the DuckDB table ``events``.

The ``traceEvents`` array is cut into parts (event_array.py, trace_parts.py: ranges of a plain file, decompressed
parts in memory, or part files) and the parts load in parallel, one per DuckDB thread, while the rest of the trace
is still being decompressed. Each part is read by the native reader (_kineto.c, about three times cheaper)
and inserted as an Arrow stream, with its final ids as soon as the parts before it are counted; or, where
that reader leaves the part (input it cannot reproduce exactly) or was not built, by DuckDB's JSON reader
with fixed columns (ingest.sql), with provisional ids renumbered at the end. Both give the same rows, and
``event_id`` is the position in the array.
"""

from __future__ import annotations

import mmap
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import duckdb

from . import connection
from .calling_thread import CallingThread
from .duckdb_reader import insert_by_duckdb
from .errors import BadInputError
from .event_array import is_gzip, open_trace, parse_whole, progress_bar, split_event_array
from .json_text import describe_fault
from .memory import PART_ROOM, Settings, in_flight_bytes, json_bytes, read_settings, reading_limits
from .sql import execute, run_sql_file
from .trace_header import TEXT_IDS, TraceHeader
from .trace_parts import TRUNCATED_WHILE_READ, UNLIMITED, CutFailed, Part, part_file, read_failure, scratch_folder
from .validate import describe_unreadable_events

try:
    from . import _kineto as native_reader
except ImportError:  # built without a C compiler: DuckDB's JSON reader reads every part
    native_reader = None

PART_ID_BITS = 40  # a part's provisional ids are its index << PART_ID_BITS + the position in the part
MIN_PART_BYTES = 32 << 20  # below this one part: a thread is not worth it
MAX_PART_BYTES = 128 << 20  # a plain file is cut into a multiple of the workers of parts at most this size
MIN_FLIGHT_PART_BYTES = 8 << 20  # and at least this size, however many workers share the in-flight budget
MAX_DECODERS = 4  # threads decoding gzip members ahead (gzip_members.py): 4 decode ~5 GB/s, more only hold memory
# part size while decompressing, when the total size is not known: the fastest size measured (benchmarks/RESULTS.md)
STREAM_PART_BYTES = 32 << 20
WHOLE_PARSE_LIMIT = 64 << 20  # a trace the fast path could not read is parsed whole up to this many bytes


def ingest_trace(
    con: duckdb.DuckDBPyConnection,
    path: str | os.PathLike,
    *,
    progress: bool = False,
    rank: int = 0,
    settings: Settings | None = None,
) -> TraceHeader:
    """Create table ``events`` (see events.sql) from the trace at ``path``, every row of rank ``rank``, and return its
    header keys. ``settings``: ``con``'s, where the caller knows them (else read)."""
    path = Path(path)
    if not path.is_file():
        raise BadInputError(path, "no such trace file" if not path.exists() else "is not a file")
    size = path.stat().st_size
    if size == 0:
        raise BadInputError(path, "the file is empty")
    header = TraceHeader(str(path), is_gzip(path), size, rank=int(rank))
    settings = settings or read_settings(con)
    workers = max(1, settings.threads)
    budget = in_flight_bytes(settings)
    if header.compressed:
        part_bytes = STREAM_PART_BYTES
        parts = -(-json_bytes(path, True) // part_bytes)  # as its sizes tell: only where parts load depends on it
    else:  # a multiple of the workers of parts, one loading on each worker (its range mapped) within the budget
        most = min(MAX_PART_BYTES, max(MIN_FLIGHT_PART_BYTES, budget // workers))
        parts = 1 if size < MIN_PART_BYTES else workers * -(-size // (workers * most))
        part_bytes = -(-size // parts)
    # parts handed out but not loaded yet, and those loading: a stream that decompresses faster than its parts load
    # holds at most this many in memory (a plain trace's parts hold nothing until they load)
    in_flight = max(2, min(workers + 1, budget // part_bytes)) if header.compressed else workers + 1
    try:
        try:
            header.keys = _load(con, path, header, part_bytes, workers, in_flight, progress, settings, parts > 1)
        except _PartsFailed:  # a cut fell inside an event: read the array again as one part
            header.keys = _load(con, path, header, UNLIMITED, 1, 2, progress, settings, False)
    except _WholeParseNeeded:
        header.keys = _load_whole(con, path, header, settings)
    header.settle_repeats()
    return header


class _PartsFailed(Exception):
    pass


class _WholeParseNeeded(Exception):
    """The streamed array is not JSON: corrupt, or cut at the wrong ']' (keys after traceEvents that hold
    arrays). A whole-document parse settles which, for inputs of bounded size."""


def _load_whole(con, path: Path, header: TraceHeader, settings: Settings) -> dict:
    run_sql_file(con, "events.sql")
    header.start_over()
    with scratch_folder() as scratch:
        with open_trace(path, header.compressed) as stream:
            keys = parse_whole(path, stream, scratch, reading_limits(settings, 1), header.leniencies)
        file = part_file(scratch, 0)
        try:
            with _NativeInserts(con) as inserts:
                _load_part(con, 0, Part(0, file), header, _PartCounts(), inserts)
        except duckdb.Error as exc:
            problem = describe_unreadable_events(con, file)
            raise BadInputError(
                path, problem or f"traceEvents is not a valid array of trace events ({_first_line(exc)})"
            ) from None
    return keys


def _load(
    con,
    path: Path,
    header: TraceHeader,
    part_bytes: int,
    workers: int,
    in_flight: int,
    progress: bool,
    settings: Settings,
    several: bool,
) -> dict:
    """``several``: the trace is expected to cut into several parts, which load on a pool of ``workers`` threads
    while the next are cut; one part loads on this thread, which would only wait for it (a small trace's load: a pool
    thread's start and hand-off cost it 1-2 ms of CPU and up to 8 ms of wall time on 2 cores, benchmarks/RESULTS.md)."""
    run_sql_file(con, "events.sql")
    header.start_over()  # this may be the second try, as one part
    loads: list[Future] = []
    with (
        scratch_folder() as scratch,
        _kept_pages(several and not header.compressed),
        _NativeInserts(con, several) as inserts,
        ThreadPoolExecutor(workers, thread_name_prefix="kernelscope-ingest") if several else CallingThread() as pool,
        progress_bar(path, header.size_bytes, progress) as advance,
    ):
        parts: list[Part] = []
        counts = _PartCounts()
        slots = threading.BoundedSemaphore(in_flight)  # a part waits for a free slot before it is handed out
        # one part (the second try) may take the whole memory limit; each of several, their share but their size
        limits = reading_limits(settings, 1 if part_bytes >= UNLIMITED else workers + 1)
        if part_bytes < UNLIMITED:
            limits = replace(limits, max_part_bytes=max(limits.max_part_bytes, part_bytes + PART_ROOM))

        def on_part(index: int, part: Part) -> None:
            parts.append(part)
            slots.acquire()
            loads.append(pool.submit(_load_part, con, index, part, header, counts, inserts))
            loads[-1].add_done_callback(lambda _: slots.release())

        try:
            keys = split_event_array(
                path,
                scratch,
                compressed=header.compressed,
                part_bytes=part_bytes,
                on_part=on_part,
                advance=advance,
                in_place=native_reader is not None,
                limits=limits,
                # a gzip file of members is decoded ahead on up to half the workers, within the in-flight budget
                threads=max(1, min(workers // 2, MAX_DECODERS, in_flight // 2)),
                leniencies=header.leniencies,
            )
        except CutFailed:
            raise _PartsFailed from None
        failures = [f.exception() for f in loads if f.exception() is not None]
        if failures:
            inserts.abandon()
        for failure in failures:  # a fault of the file itself, or of its size, not of a part's cut: no second try
            if isinstance(failure, (BadInputError, MemoryError)):  # nor is memory spent a fault of the file
                raise failure
            if isinstance(failure, duckdb.OutOfMemoryException):
                raise BadInputError(path, beyond_the_limits(con, failure)) from None
        if failures and len(loads) == 1:
            problem = describe_unreadable_events(con, parts[0].as_file())
            if problem is None and os.path.getsize(parts[0].file) <= WHOLE_PARSE_LIMIT:
                raise _WholeParseNeeded
            problem = problem or _fault_in_strings(parts[0], header.compressed)
    if failures:
        if len(loads) > 1:
            raise _PartsFailed
        detail = f"traceEvents is not a valid array of trace events ({_first_line(failures[0])})"
        raise BadInputError(path, problem or detail)
    counts = [f.result() for f in loads]
    if len(counts) > 1 and len(header.native_parts) < len(counts):  # parts DuckDB read have provisional ids
        firsts = [sum(counts[:i]) for i in range(len(counts))]
        shifts = [first - (i << PART_ID_BITS) for i, first in enumerate(firsts)]
        run_sql_file(con, "event_ids.sql", shifts=str(shifts), part_id_bits=str(PART_ID_BITS))
    return keys


@contextmanager
def _kept_pages(keep: bool):
    """Where ``keep``, the native reader keeps the maps a part's arrays free for the next parts' while the block runs
    (_kineto.c, keep_pages): fresh pages cost a fault and the kernel's zeroing each, a large share of a large plain
    trace's ingest. Not for a compressed trace, whose peak memory is its ingest's (its decompressed parts in flight),
    which the kept maps raised by 1.5 % at 1 GB; nor for one part, which has no next part (benchmarks/RESULTS.md)."""
    if native_reader is None or not keep:
        yield
        return
    native_reader.keep_pages(True)
    try:
        yield
    finally:
        native_reader.keep_pages(False)


class _PartCounts:
    """The events of each part, published as each part learns its own (the native reader before inserting),
    so that a part read natively can insert with final ids as soon as every part before it is counted."""

    def __init__(self) -> None:
        self._known = threading.Condition()
        self._counts: dict[int, int | None] = {}

    def publish(self, index: int, count: int | None) -> None:
        """``count`` None: the part failed, and the parts after it stop waiting."""
        with self._known:
            self._counts.setdefault(index, count)
            self._known.notify_all()

    def first_id(self, index: int) -> int:
        """The id of the part's first event: the events of the parts before it (waits until they are counted)."""
        with self._known:
            self._known.wait_for(lambda: all(i in self._counts for i in range(index)))
            before = [self._counts[i] for i in range(index)]
        if None in before:
            raise _PartsFailed
        return sum(before)


def _load_part(
    con: duckdb.DuckDBPyConnection,
    index: int,
    part: Part,
    header: TraceHeader,
    counts: _PartCounts,
    inserts: _NativeInserts,
) -> int:
    """Append one part to ``events``; return how many events it held.

    A part the native reader reads gets its final ids; one DuckDB's reader reads gets provisional ones,
    ``index << PART_ID_BITS`` + the position in the part (event_ids.sql renumbers them)."""
    count = None
    try:
        if native_reader is not None:
            count = _insert_natively(part, index, counts, inserts, header)
        if count is None:
            with connection.noted(con.cursor()) as cursor:
                count = insert_by_duckdb(cursor, part.as_file(), index << PART_ID_BITS, header.rank, header.leniencies)
        return count
    finally:
        counts.publish(index, count)
        if count is not None or os.path.exists(part.file):
            part.drop_data()  # loaded, or on file for a second look: the memory can go


class _ArrowStream:
    """An Arrow C stream capsule as DuckDB scans it (the Arrow PyCapsule interface)."""

    def __init__(self, capsule) -> None:
        self.capsule = capsule

    def __arrow_c_stream__(self, requested_schema=None):
        return self.capsule


def scanned_insert(facts: int) -> str:
    """The file that inserts a natively read part with these facts (scan's): one holding a pid or tid written as a
    string keys them (ingest_scanned_text_ids.sql); any other part's columns go in as the reader gives them."""
    return "ingest_scanned_text_ids.sql" if facts & TEXT_IDS else "ingest_scanned.sql"


class _NativeInserts:
    """The natively read parts' inserts: each loading thread inserts on a connection of its own, in one
    transaction committed when all parts have loaded: each insert committed on its own has DuckDB merge it into
    the table, a cost that grows with the number of parts (benchmarks/RESULTS.md, "Ids and transactions")."""

    def __init__(self, con: duckdb.DuckDBPyConnection, several: bool = True) -> None:
        self.con = con
        self.local = threading.local()
        self.cursors: list[duckdb.DuckDBPyConnection] = []
        self.lock = threading.Lock()
        # One part inserts on the calling thread's connection in the insert's own transaction: a cursor's BEGIN and
        # COMMIT around a single statement cost a small trace's load ~0.4 ms, and a failed insert commits nothing.
        self.one_statement = not several

    def insert(self, stream, first_id: int, rank: int, facts: int) -> None:
        cursor = self.con if self.one_statement else getattr(self.local, "cursor", None)
        if cursor is None:
            cursor = self.local.cursor = connection.noted(self.con.cursor())
            execute(cursor, "BEGIN TRANSACTION")
            with self.lock:
                self.cursors.append(cursor)
        cursor.register("scanned_part", _ArrowStream(stream))
        run_sql_file(cursor, scanned_insert(facts), first_id=str(first_id), rank=str(rank))
        cursor.unregister("scanned_part")

    def abandon(self) -> None:
        self._end("ROLLBACK")

    def _end(self, how: str) -> None:
        with self.lock:
            cursors, self.cursors = self.cursors, []
        for cursor in cursors:
            try:
                execute(cursor, how)
            finally:
                cursor.close()

    def __enter__(self) -> _NativeInserts:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self._end("COMMIT" if kind is None else "ROLLBACK")


def _insert_natively(
    part: Part, index: int, counts: _PartCounts, inserts: _NativeInserts, header: TraceHeader
) -> int | None:
    """Read a part with the native reader into ``events``; None (and why, in ``header``) if it leaves the part. The
    reader also tells whether the part holds repeats, and gives its keys (TraceHeader.settle_repeats)."""
    with part.contents() as (data, bare):
        try:
            scanned = native_reader.scan(data, 0, bare, True)
        except OSError as exc:  # a mapped page could not be read (SIGBUS, caught): the file shrank or its device failed
            raise _pages_lost(part, header, exc) from None
    rows, stream = scanned[0], scanned[1]
    if rows is None:
        header.duckdb_parts.append(f"{stream} at byte {scanned[2]} of the part")
        return None
    counts.publish(index, rows)  # the parts after this one need not wait for its insert
    inserts.insert(stream, counts.first_id(index), header.rank, scanned[5])
    header.native_parts.append(index)
    if scanned[2] == 0:
        header.rows_checked.append(index)
    header.part_repeats[index] = scanned[3]
    header.part_facts[index] = scanned[5]
    if scanned[4] is not None:
        header.repeat_keys.append(scanned[4])
    return rows


def _fault_in_strings(part: Part, compressed: bool) -> str | None:
    """Where and what breaks a string in the part file of a one-part trace too large to parse whole
    (json_text.describe_fault), for the message."""
    with open(part.file, "rb") as raw, mmap.mmap(raw.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        fault = describe_fault(mapped, compressed, part.at)
    return None if fault is None else f"is not valid JSON ({fault})"


def _pages_lost(part: Part, header: TraceHeader, exc: OSError) -> BadInputError:
    """Why a part's mapped pages went away under the reader: a trace truncated under it, or one whose pages could not
    be read from its device (an I/O error faults the page just as a truncation does)."""
    try:
        shrank = part.source is None or os.stat(part.source).st_size < part.last
    except OSError:  # gone
        shrank = True
    problem = TRUNCATED_WHILE_READ if shrank else read_failure("an I/O error under its mapped pages")
    return BadInputError(header.path, problem)


def beyond_the_limits(con: duckdb.DuckDBPyConnection, exc: duckdb.OutOfMemoryException) -> str:
    """The sentence for a trace that needs more memory and spill than the run's limits give."""
    memory, disk = con.execute(
        "SELECT current_setting('memory_limit'), current_setting('max_temp_directory_size')"
    ).fetchone()
    return (
        f"needs more than the memory limit ({memory}) and the disk limit ({disk}) to load: give it more with"
        f" memory_limit / disk_limit ({_first_line(exc)})"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
