"""Several processes' traces pasted into one file (one traceEvents list, as tools merge a job's ranks): each process
is told apart (process_parts.sql) and attributed as a rank of its own, its events alone in ``events``: each numbers
its calls' correlations and its operators' External ids from the same start, so theirs collide."""

from __future__ import annotations

import os

import duckdb

from .errors import BadInputError
from .rundir import MAX_RANK
from .sql import run_sql_file
from .validate import event_label


def pasted_processes(con: duckdb.DuckDBPyConnection, path: str | os.PathLike, rank: int) -> int:
    """How many processes launch (in a CPU recording: run CPU operators) in table ``events`` (0 where one does, or
    none); where several do, ``events`` is set aside as ks_pasted_events, each event's process in ks_process_of_event
    (take_process gives back each process's events, pasted_events all of them). Refuses, naming it, the first device
    event whose process is not known, and processes ranked from the header's ``rank`` past MAX_RANK."""
    several, launched = run_sql_file(con, "launch_processes.sql").fetchone()
    if not several and (launched or not run_sql_file(con, "cpu_processes.sql").fetchone()[0]):
        return 0
    row = run_sql_file(con, "process_parts.sql").fetchone()
    count = con.execute("SELECT count(*) FROM ks_processes").fetchone()[0]
    if count <= 1:  # the other pids with launches were devices' (process_parts.sql): one process's trace
        for table in ("ks_launch_pids", "ks_processes", "ks_device_owners", "ks_process_of_event"):
            con.execute(f"DROP TABLE IF EXISTS {table}")
        return 0
    if row is not None:
        event_id, cat, name, correlation, pids, device_pid = row
        what = event_label(cat, name)
        processes = ", ".join(map(str, pids[:-1])) + f" and {pids[-1]}"
        raise BadInputError(
            path,
            f"traceEvents[{event_id}]{f' ({what})' if what else ''} has correlation {correlation}, which launches of"
            f" processes (pids) {processes} share, and the other work of its device (pid {device_pid}) is not of"
            " exactly one of them: which process launched it is unknown",
        )
    if rank + count - 1 > MAX_RANK:
        raise BadInputError(
            path,
            f"holds the traces of {count} processes pasted into one file, ranked from its distributedInfo.rank {rank}:"
            f" the last one's rank, {rank + count - 1}, is past {MAX_RANK}",
        )
    for table in ("ks_launch_pids", "ks_processes", "ks_device_owners"):
        con.execute(f"DROP TABLE {table}")
    con.execute("ALTER TABLE events RENAME TO ks_pasted_events")
    return count


def take_process(con: duckdb.DuckDBPyConnection, process: int) -> None:
    """Table ``events`` of process ``process`` (0 first) of the pasted file, of the file's rank + ``process``."""
    run_sql_file(con, "process_part.sql", process=str(int(process)))


def pasted_events(con: duckdb.DuckDBPyConnection) -> None:
    """Table ``events`` of the whole pasted file, each event of its process's rank, once every process is attributed
    (its own ``events`` dropped): the file's events are held once, and each process's copy only while attributed."""
    run_sql_file(con, "pasted_events.sql")
