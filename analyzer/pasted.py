"""Several processes' traces pasted into one file (one traceEvents list, as tools merge a job's ranks): each process
numbers its calls' correlations and its operators' External ids from the same start, so they collide; the
attribution reads each event's values made its process's own (process_keys.sql) and the trace's are put back
after it."""

from __future__ import annotations

import os

import duckdb

from .errors import BadInputError
from .sql import run_sql_file
from .validate import event_label


def separate_processes(con: duckdb.DuckDBPyConnection, path: str | os.PathLike) -> bool:
    """Make the correlations and External ids of table ``events`` each process's own where launches of several
    processes share correlations; whether they did (then rejoin_processes puts the trace's back). Refuses, naming
    it, the first device event whose process is not known."""
    if not run_sql_file(con, "shared_correlations.sql").fetchone()[0]:
        return False
    row = run_sql_file(con, "process_keys.sql").fetchone()
    if row is not None:
        event_id, cat, name, correlation, pids, device_pid = row
        if pids is None:
            problem = "has a correlation or External id too large to tell apart the processes that share correlations"
            raise BadInputError(path, f"traceEvents[{event_id}] {problem}")
        what = event_label(cat, name)
        processes = ", ".join(map(str, pids[:-1])) + f" and {pids[-1]}"
        raise BadInputError(
            path,
            f"traceEvents[{event_id}]{f' ({what})' if what else ''} has correlation {correlation}, which launches of"
            f" processes (pids) {processes} share, and the other work of its device (pid {device_pid}) is not of"
            " exactly one of them: which process launched it is unknown",
        )
    return True


def rejoin_processes(con: duckdb.DuckDBPyConnection) -> None:
    """The trace's own correlations and External ids back in ``events`` and ``kernels`` (process_keys_end.sql)."""
    run_sql_file(con, "process_keys_end.sql")
