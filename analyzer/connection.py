"""The DuckDB connections runs load into: each with the settings every run needs (connection.sql) and the macros
(span_keys.sql, scope_names.sql), which its instance was made with.

A new DuckDB database fills a catalog of thousands of built-in functions, and defining the macros costs more: on a
small trace these fixed costs are much of a load. So the in-memory database of a run that nobody else saw is used
again: ``connect()`` leases the process's idle instance (or makes one) and gives the run a connection of its own on
it (a cursor: its own variables, settings and temporary tables). ``close()`` (or the connection's garbage
collection) gives the instance back: where the connection never left the analyzer (``shared()`` was not called: a
user's SQL could have changed anything in it) and the run set no global setting the next one would not set again,
its tables are dropped and it waits for the next run; else it is closed. The settings a run sets by its size
(run_settings.py: threads, optimizer passes; memory.py: memory and spill limits) stay as it left them, as the next
run of a small trace would set them again: a run sets only those that differ (``connect(sized=True)``,
``sized_settings()``), any other connection is given the default threads and passes, and so is a connection handed
to a user (``shared()``). Setting them back and again cost a small trace's load ~1 ms, and setting memory_limit
has DuckDB give its allocator's freed memory back to the system, which the next run faulted in again (3,250 against
635 minor faults per load of a small trace: benchmarks/RESULTS.md). A file database's connection is leased the same
way, on an instance of its own that is never used again. ``prepare()`` starts making an instance, and parsing
the SQL files a load runs, on a thread where none is idle: the module's import calls it, so a process's first
instance is made while the rest of the package imports, and profile() as its recording starts. An instance is never
used by a forked child (its threads are not there).

A small run's connection itself waits with the instance for the next run (``close(con, keep=True)``: Run.close, where
its trace was small enough to keep its step tables, run_settings.keeps_steps): its variables, which every run of the
same naming scheme sets alike (sql.define_scope_names sets only those that differ), then cost the next run nothing,
where setting them on a new connection cost a small trace's load ~1.2 ms (eight SETs, cpu2). Only the next run gets
it (``connect(sized=True)``); any other connection is a new one. The temporary tables it kept are each made again
(CREATE OR REPLACE) by the next run's statements that read them, as on a new connection; those of earlier runs are
dropped before such a connection is handed to a user (``shared()``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import weakref
from concurrent.futures import Future
from dataclasses import dataclass
from typing import NamedTuple

from .native_modules import duckdb  # before any other import of DuckDB: its initialization is not to be interrupted
from .run_settings import lean_disabled_optimizers
from .sql import execute, forget_held, parse_ahead, quote, run_sql_file, sql_text

IN_MEMORY = ":memory:"
# a global setting that only large runs set (memory.py), which a run that follows could not lower
SET_BY_LARGE_RUNS = "block_allocator_memory"
# the tables a run's load leaves in its instance's catalog (events.sql, attribution_rows.sql); its step tables are
# temporary, its connection's own
RUN_TABLES = ("events", "kernels")
NEVER_CHECKPOINT = "1000TB"  # DuckDB's largest unit: no run writes this much
# The SQL files every load runs without literals (rank_parts.py, ingest.py), parsed where an instance is made on a
# thread (prepare), before the first load needs them: DuckDB's parser takes ~10 ms of attribution.sql alone.
LOADS_RUN = (
    "connection.sql",
    "events.sql",
    "npu_tasks.sql",
    "attributable.sql",
    "frame_scopes.sql",
    "frames_needed.sql",
    "attribution.sql",
    "held_spans.sql",
    "held_native.sql",
    "attribution_rows.sql",
    "attribution_end.sql",
)

_lock = threading.Lock()
# (pid, instance, its settings when made, its sized settings now, the last run's connection kept, or None)
_idle: tuple[int, duckdb.DuckDBPyConnection, _Made, Sized, duckdb.DuckDBPyConnection | None] | None = None
_making: tuple[int, Future] | None = None  # (pid, the instance being made on a thread)
_leases: dict[int, _Lease] = {}  # id of a leased connection -> its lease
_open: weakref.WeakSet = weakref.WeakSet()  # every connection the package made: interrupt_queries() reaches them


def noted(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """``con`` (a new connection or cursor), noted so that interrupt_queries() reaches the query it runs."""
    _open.add(con)
    return con


def new_connection(database: str = IN_MEMORY) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect(database)``, noted (``noted``)."""
    return noted(duckdb.connect(database))


def interrupt_queries() -> None:
    """Interrupt the query each open connection runs, from any thread (DuckDB's ``interrupt()``). A signal's Python
    handler runs only once the main thread runs Python again, and a query the main thread waits on while DuckDB's
    threads do its work looks for one only now and then: Ctrl-C during a long query of ``kernelscope sql`` was
    not seen until the query ended (cli/interrupts.py calls this where the handler did not run soon)."""
    for con in list(_open):
        try:
            con.interrupt()
        except duckdb.Error:  # closed meanwhile
            pass


@dataclass
class Sized:
    """The settings a run sets by its size, as its instance has them: threads and disabled_optimizers (run_settings.py)
    as DuckDB shows them, and memory_limit and max_temp_directory_size (memory.py) as a run of a connection made with
    ``sized`` set them last (None: unknown, to be set)."""

    threads: int
    disabled_optimizers: str
    memory_limit: str | None = None
    disk_limit: str | None = None


class _Made(NamedTuple):
    """An instance's settings when it was made: SET_BY_LARGE_RUNS, and the defaults of the settings a run sets by
    its size (run_settings.py) with the value of disabled_optimizers that plans a small run."""

    set_by_large_runs: str
    threads: int
    disabled_optimizers: str
    lean_optimizers: str

    @property
    def defaults(self) -> Sized:
        return Sized(self.threads, self.disabled_optimizers)

    def restore(self, con: duckdb.DuckDBPyConnection, threads: str | int, disabled_optimizers: str) -> None:
        """Set the sized settings of ``con``'s instance, now ``threads`` and ``disabled_optimizers``, back."""
        if int(threads) != self.threads:
            con.execute(f"SET threads = {self.threads}")
        if disabled_optimizers != self.disabled_optimizers:
            con.execute(f"SET disabled_optimizers = {quote(self.disabled_optimizers)}")


class _Lease:
    """What gives a leased connection's instance back, and whether it may be used again."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        instance: duckdb.DuckDBPyConnection,
        fresh: _Made,
        sized: Sized,
        reusable: bool,
    ):
        self.instance, self.reusable, self.fresh, self.sized, self.handed_out = instance, reusable, fresh, sized, False
        self.kept: duckdb.DuckDBPyConnection | None = None  # the connection, kept open for the next run (close)
        self.ran_before = False  # the connection served earlier runs: their temporary tables may be in it
        self.give_back = weakref.finalize(con, _give_back, id(con), os.getpid(), instance, fresh, self)


def connect(database: str = IN_MEMORY, *, sized: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection to ``database`` with the runs' settings and macros: for an in-memory database, one of its own on
    the process's idle instance (waiting for the one being made, if any), else one on a new instance. ``sized``: the
    caller sets the settings a run sets by its size itself (run_settings.py, memory.py), where they differ from
    sized_settings(); else the threads and passes are the defaults."""
    kept = None
    if database == IN_MEMORY:
        instance, fresh, now, kept = _take()
        if kept is not None and not sized:  # a run's connection is for a run (Run: sized), not for others' statements
            kept.close()
            kept = None
    else:
        instance, fresh = _instance(database)
        now = fresh.defaults
    try:
        con = kept if kept is not None else noted(instance.cursor())
        if not sized:  # and its memory settings unknown: whoever uses it may set them otherwise
            fresh.restore(con, now.threads, now.disabled_optimizers)
            now = fresh.defaults
    except BaseException:
        instance.close()
        raise
    lease = _leases[id(con)] = _Lease(con, instance, fresh, now, reusable=database == IN_MEMORY)
    lease.ran_before = kept is not None
    return con


def made_settings(con: duckdb.DuckDBPyConnection) -> _Made:
    """The settings ``con``'s instance had when it was made (``con`` from connect())."""
    return _leases[id(con)].fresh


def sized_settings(con: duckdb.DuckDBPyConnection) -> Sized:
    """The settings a run sets by its size as ``con``'s instance has them (``con`` from connect()): as the last run left
    them, for a connection made with ``sized``, which limit_threads, limit_optimizers and limit_memory read and keep up
    to date (the memory settings, which DuckDB shows rounded, are known only from them)."""
    return _leases[id(con)].sized


def shared(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """``con``, about to be handed to code outside the analyzer: its instance will not be used again, and has the
    defaults of the settings a run sets by its size (a user's SQL may read far more than the run)."""
    lease = _leases.get(id(con))
    if lease is not None and not lease.handed_out:
        lease.handed_out, lease.reusable = True, False
        lease.fresh.restore(con, *_sized_settings(con))
        if lease.ran_before:  # the temporary tables earlier runs left in it are not the user's
            for kind, name in con.execute(
                "SELECT 'TABLE', table_name FROM duckdb_tables() WHERE temporary"
                " UNION ALL SELECT 'VIEW', view_name FROM duckdb_views() WHERE temporary AND NOT internal"
            ).fetchall():
                con.execute(f'DROP {kind} IF EXISTS temp."{name}"')
    return con


def _sized_settings(con: duckdb.DuckDBPyConnection) -> tuple[str, str]:
    return con.execute("SELECT current_setting('threads'), current_setting('disabled_optimizers')").fetchone()


def close(con: duckdb.DuckDBPyConnection, *, keep: bool = False) -> None:
    """Close ``con``; a connection from ``connect()`` gives its instance back, and with ``keep`` (a small run that
    loaded: module docstring) the connection too, open, where the instance may be used again. A kept connection's
    instance is not asked what it holds (a SELECT of its settings and catalog cost a small trace's load ~0.5-1 ms):
    such a run, which no user saw, set no global setting but its sized ones, which it keeps up to date in
    sized_settings(), and made no view and no table but RUN_TABLES."""
    lease = _leases.get(id(con))
    if keep and lease is not None and lease.reusable and not lease.handed_out:
        lease.kept = con
    else:
        con.close()
    if lease is not None:
        lease.give_back()


def prepare() -> Future:
    """Start making an in-memory instance on a thread, unless one is idle or being made; the Future is done when it
    is ready."""
    global _making
    with _lock:
        pid = os.getpid()
        if _idle is not None and _idle[0] == pid:
            ready: Future = Future()
            ready.set_result(None)
            return ready
        if _making is not None and _making[0] == pid:
            return _making[1]
        made: Future = Future()
        _making = (pid, made)
    threading.Thread(target=_make_into, args=(made,), name="kernelscope-connect", daemon=True).start()
    return made


def _take() -> tuple[duckdb.DuckDBPyConnection, _Made, Sized, duckdb.DuckDBPyConnection | None]:
    """The idle instance, else the one being made, else a new one, with its settings when made, its sized settings
    now and the connection kept with it (None: none)."""
    global _idle, _making
    pid = os.getpid()
    with _lock:
        if _idle is not None and _idle[0] == pid:
            (_, instance, fresh, now, kept), _idle = _idle, None
            return instance, fresh, now, kept
        making = None
        if _making is not None and _making[0] == pid:
            (_, making), _making = _making, None
    if making is not None:
        try:
            instance, fresh = making.result()
            return instance, fresh, fresh.defaults, None
        except duckdb.Error:  # made on the thread: the same failure, if any, comes again below
            pass
    instance, fresh = _instance()
    return instance, fresh, fresh.defaults, None


def _give_back(key: int, pid: int, instance, fresh: _Made, lease: _Lease) -> None:
    """A leased connection is closed or gone: its instance waits for the next run, its tables dropped and its sized
    settings as the run left them (the next run sets its own), where it may be used again and none waits; else it is
    closed."""
    global _idle
    _leases.pop(key, None)
    kept, lease.kept = lease.kept, None
    if pid != os.getpid():
        return
    if kept is not None:
        forget_held(kept)  # the next run holds its own drops back, or none
    reusable, now, tables = lease.reusable, lease.sized, RUN_TABLES
    if reusable and kept is None:  # a kept one's are known (close)
        try:
            setting, threads, disabled_optimizers, views, tables = execute(  # as DuckDB has them
                instance,
                f"SELECT current_setting('{SET_BY_LARGE_RUNS}'), current_setting('threads'), "
                "current_setting('disabled_optimizers'), (SELECT count(*) FROM duckdb_views() WHERE NOT internal), "
                "(SELECT list(table_name) FROM duckdb_tables())",
            ).fetchone()
            reusable = setting == fresh.set_by_large_runs and not views
            now = Sized(int(threads), disabled_optimizers, now.memory_limit, now.disk_limit)
        except duckdb.Error:
            reusable = False
    if reusable:
        try:
            for table in tables or ():
                execute(instance, f'DROP TABLE "{table}"')
        except duckdb.Error:
            reusable = False
    with _lock:
        if reusable and _idle is None:
            _idle, instance = (pid, instance, fresh, now, kept), None
    if instance is not None:
        if kept is not None:
            kept.close()
        instance.close()


def _make_into(made: Future) -> None:
    try:
        instance, fresh = _instance()
        try:
            parse_ahead(instance, LOADS_RUN)
        except BaseException:
            instance.close()
            raise
        made.set_result((instance, fresh))
    except BaseException as exc:  # noqa: BLE001 - handed to the taker
        made.set_exception(exc)


def _instance(database: str = IN_MEMORY) -> tuple[duckdb.DuckDBPyConnection, _Made]:
    instance = _made(database)
    try:
        if database == IN_MEMORY:
            # An in-memory instance checkpoints (compresses every table) at the commit where its estimated WAL
            # passes the threshold: every third load of a 100 MB trace paid 0.4 s for it, in whichever statement
            # crossed the line.
            instance.execute(f"SET checkpoint_threshold = {quote(NEVER_CHECKPOINT)}")
        setting, threads, disabled_optimizers = instance.execute(
            f"SELECT current_setting('{SET_BY_LARGE_RUNS}'), current_setting('threads'), "
            "current_setting('disabled_optimizers')"
        ).fetchone()
        made = _Made(setting, int(threads), disabled_optimizers, lean_disabled_optimizers(instance))
    except BaseException:
        instance.close()
        raise
    return instance, made


def _made(database: str) -> duckdb.DuckDBPyConnection:
    """A connection to ``database`` holding the macros, with a spill directory of its own, removed with it (DuckDB
    cannot switch an instance to another once it has spilled)."""
    con = new_connection(database)
    spill = tempfile.mkdtemp(prefix="kernelscope-spill-")
    weakref.finalize(con, shutil.rmtree, spill, True)
    try:
        con.execute(f"SET temp_directory = {quote(spill)};" + sql_text("span_keys.sql") + sql_text("scope_names.sql"))
        run_sql_file(con, "connection.sql")  # the instance's settings: its connections have them
    except BaseException:
        con.close()
        raise
    return con


@atexit.register
def _close_instances() -> None:
    """The idle instance, and one still being made when the interpreter exits, are closed, not cut off mid-way."""
    global _idle, _making
    with _lock:
        idle, _idle = _idle, None
        making, _making = _making, None
    pid = os.getpid()
    if idle is not None and idle[0] == pid:
        if idle[4] is not None:
            idle[4].close()
        idle[1].close()
    if making is not None and making[0] == pid:
        try:
            making[1].result()[0].close()
        except BaseException:  # noqa: BLE001 - its making failed (Ctrl-C cut the package's import): nothing to close
            pass


# A process's first load would make its DuckDB instance, define the macros and parse the SQL files (~50 ms of a
# 10 MB trace's ~150 ms, cpu2): they are made on a thread from the package's import on, while the rest of it imports
# (pandas: most of its ~0.4 s). A process that loads nothing leaves the instance unused.
prepare()
