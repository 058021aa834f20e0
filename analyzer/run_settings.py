"""The DuckDB settings a run is given by the size of its trace: its threads, its optimizer passes, and whether its
attribution drops its step tables as it goes.

Threads: DuckDB schedules every statement's pipelines on all of its threads (by default one per core), whatever the
size of the tables: on a trace of a few MB, starting and joining them costs more than they save, while a trace of
100 MB needs them (benchmarks/RESULTS.md, "DuckDB threads"). A run is given one thread per THREAD_BYTES of JSON, at
least one and at most its instance's default.

Optimizer passes: DuckDB runs some forty passes over every statement's plan. On a trace of a few hundred KB they
cost more than the statements themselves (a sixth of a small model's load, cpu2) and on one of a few MB as much as
they save; larger traces need them (a 20 MB trace loads a quarter slower without them). A trace of less than
LEAN_BYTES of JSON is planned with CTE inlining alone: without it, attribution.sql's CTEs would be materialized
(3.3x slower at 20 MB). The passes change plans, never results.

Step tables: attribution.sql and frames.sql drop each temporary table once the steps after it no longer read it,
which frees a large trace's memory for the next step; on a small trace each DROP costs ~0.3 ms, the dozen of
attribution.sql ~4 ms of its load. A trace of less than LEAN_BYTES keeps them (a few MB) to the end of its connection,
which removes temporary tables with it, or until the connection is handed to a user (sql.py, hold_drops; run.py,
Run.con).

The first two settings are global to a DuckDB instance: a run sets them where the instance's last run left them
otherwise (each SET, and setting the defaults back, costs a small trace ~0.15 ms), and connection.py gives any other
connection, and a run's connection handed to a user, the defaults.
"""

from __future__ import annotations

import duckdb

from .sql import quote

THREAD_BYTES = 8 << 20
LEAN_BYTES = 2 << 20
LEAN_PASSES = frozenset({"cte_inlining"})  # the passes a small trace is planned with


def run_threads(json_size: int, default: int) -> int:
    """The threads a run of ``json_size`` bytes of JSON is given, of an instance's ``default``."""
    return max(1, min(default, json_size // THREAD_BYTES))


def limit_threads(con: duckdb.DuckDBPyConnection, json_size: int, default: int, now: int | None = None) -> int:
    """Give ``con``'s instance the threads a run of ``json_size`` bytes of JSON needs, of its ``default``; ``now``: its
    threads now (None: the default). Returns them."""
    threads = run_threads(json_size, default)
    if threads != (default if now is None else now):
        con.execute(f"SET threads = {threads}")
    return threads


def lean_disabled_optimizers(con: duckdb.DuckDBPyConnection) -> str:
    """The value of setting ``disabled_optimizers`` that leaves a small trace's statements LEAN_PASSES alone."""
    passes = (name for (name,) in con.execute("SELECT name FROM duckdb_optimizers() ORDER BY name").fetchall())
    return ",".join(name for name in passes if name not in LEAN_PASSES)


def limit_optimizers(
    con: duckdb.DuckDBPyConnection, json_size: int, lean: str, now: str | None = None, default: str = ""
) -> str:
    """Plan a run of ``json_size`` bytes of JSON with only LEAN_PASSES where it is small (``lean``: the value of
    lean_disabled_optimizers for ``con``'s instance), else with its ``default`` passes; ``now``: the instance's
    disabled_optimizers now (None: the default). Returns the passes disabled (the same set as DuckDB shows)."""
    wanted = lean if json_size < LEAN_BYTES else default
    if _passes(wanted) != _passes(default if now is None else now):  # DuckDB shows them in an order of its own
        con.execute(f"SET disabled_optimizers = {quote(wanted)}")
    return wanted


def _passes(disabled_optimizers: str) -> set[str]:
    return {name.strip() for name in disabled_optimizers.split(",") if name.strip()}


def keeps_steps(json_size: int) -> bool:
    """Whether a run of ``json_size`` bytes of JSON leaves the attribution's step tables to the end of its
    connection instead of dropping each as it goes."""
    return json_size < LEAN_BYTES
