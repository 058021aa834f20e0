"""The DuckDB connection a run loads into: made with the settings and macros every run needs (connection.sql,
scope_names.sql), and made ahead of time where the process knows a run is coming.

A new DuckDB database fills a catalog of thousands of built-in functions, and each statement costs a fraction of a
millisecond to plan before it runs: on a small trace these fixed costs are much of a load. ``prepare()`` starts
making the next in-memory connection on a thread of its own (profile() calls it as its recording starts, so the
connection is made while the model warms up); ``connect()`` takes it, or makes one there and then. A prepared
connection is taken at most once, and never by a forked child (its threads are not there).
"""

from __future__ import annotations

import atexit
import os
import threading
from concurrent.futures import Future

import duckdb

from .sql import sql_text

IN_MEMORY = ":memory:"

_lock = threading.Lock()
_prepared: tuple[int, Future] | None = None  # (the pid that prepared it, the connection being made)


def connect(database: str = IN_MEMORY) -> duckdb.DuckDBPyConnection:
    """A connection to ``database`` with the runs' settings and macros: the prepared one when there is one (waiting
    for it to be ready), else a new one."""
    global _prepared
    if database == IN_MEMORY:
        with _lock:
            prepared, _prepared = _prepared, None
        if prepared is not None and prepared[0] == os.getpid():
            try:
                return prepared[1].result()
            except duckdb.Error:  # made on the thread: the same failure, if any, comes again below
                pass
    return _made(database)


def prepare() -> Future:
    """Start making the next in-memory connection on a thread, unless one is being made already; the Future is done
    when it is ready."""
    global _prepared
    with _lock:
        if _prepared is not None and _prepared[0] == os.getpid():
            return _prepared[1]
        made: Future = Future()
        _prepared = (os.getpid(), made)
    threading.Thread(target=_make_into, args=(made,), name="kernelscope-connect", daemon=True).start()
    return made


def _make_into(made: Future) -> None:
    try:
        made.set_result(_made(IN_MEMORY))
    except BaseException as exc:  # noqa: BLE001 - handed to the taker
        made.set_exception(exc)


def _made(database: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(database)
    try:
        con.execute(sql_text("connection.sql") + sql_text("scope_names.sql"))
    except BaseException:
        con.close()
        raise
    return con


@atexit.register
def _close_prepared() -> None:
    """A connection still being made when the interpreter exits is waited for and closed, not cut off mid-way."""
    global _prepared
    with _lock:
        prepared, _prepared = _prepared, None
    if prepared is not None and prepared[0] == os.getpid():
        try:
            prepared[1].result().close()
        except duckdb.Error:
            pass
