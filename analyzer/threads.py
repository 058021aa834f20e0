"""How many threads DuckDB runs a run's statements on: on a small trace, fewer than the machine's cores.

DuckDB schedules every statement's pipelines on all of its threads (by default one per core), whatever the size of
the tables: on a trace of a few MB, starting and joining them costs more than they save, while a trace of 100 MB
needs them (benchmarks/RESULTS.md, "DuckDB threads"). A run is given one thread per THREAD_BYTES of JSON, at least
one and at most its instance's default. The setting is global to a DuckDB instance: connection.py sets the default
again when a run gives its instance back.
"""

from __future__ import annotations

import duckdb

THREAD_BYTES = 8 << 20


def run_threads(json_size: int, default: int) -> int:
    """The threads a run of ``json_size`` bytes of JSON is given, of an instance's ``default``."""
    return max(1, min(default, json_size // THREAD_BYTES))


def limit_threads(con: duckdb.DuckDBPyConnection, json_size: int, default: int) -> None:
    """Give ``con``'s instance the threads a run of ``json_size`` bytes of JSON needs, of its ``default``."""
    threads = run_threads(json_size, default)
    if threads != default:
        con.execute(f"SET threads = {threads}")
