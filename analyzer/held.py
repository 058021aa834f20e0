"""Which spans hold each launch point of the attribution (table ks_held, for attribution_rows.sql).

The native sweep (_held.c) reads each thread's spans in nesting order once; held_by_sql.sql's range join, which
gives the same table, runs where that extension is not built (it is optional, as the native reader is: setup.py).
The sweep reads its rows (held_spans.sql: the points, then the spans, asked for once the points are read) as DuckDB's
Arrow C streams (twice as fast as NumPy columns: 0.09 against
0.19 s on a 250 MB trace), and its result goes back in as a dict of NumPy columns that held_native.sql reads by its
local name (DuckDB's replacement scan): registering a pandas frame cost a small trace's load ~2 ms more, in the frame,
its view's CREATE and DROP and pandas' column checks (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import warnings

import duckdb
import numpy as np

from .sql import parsed_statements, run_sql_file

try:
    from . import _held as native_sweep
except ImportError:  # pragma: no cover - built wherever the native reader is
    native_sweep = None

# ks_held's columns, in the order _held.hold gives them
HELD = ("anchor", "module_id", "function_id", "inner_op_id", "outer_op_id", "inside_op_id", "inside_namespaced_op_id")


def hold_spans(con: duckdb.DuckDBPyConnection, *, native: bool = True, small: bool = False) -> None:
    """Make ks_held from ks_anchors and the trace's spans: natively where the extension is built and ``native``.
    ``small``: the trace is small enough that its spans' rows may be copied (rows_of)."""
    if native_sweep is None or not native:
        run_sql_file(con, "held_by_sql.sql")
        return
    points_of, spans_of = parsed_statements(con, "held_spans.sql")
    points, held = native_sweep.hold(rows_of(con, points_of, small), lambda: rows_of(con, spans_of, small))
    columns = np.frombuffer(held, dtype=np.int64).reshape(len(HELD), points)
    ks_held_swept = dict(zip(HELD, columns, strict=True))  # noqa: F841 - read by held_native.sql, by this name
    (table,) = parsed_statements(con, "held_native.sql")
    con.execute(table)  # here: DuckDB looks the name up in the frame that calls execute


def rows_of(con: duckdb.DuckDBPyConnection, statement: duckdb.Statement, small: bool):
    """The rows of ``statement`` as an Arrow C stream. A relation over it binds it twice, for its schema and to run it:
    on a small trace that cost ~1 ms of its load (held_spans.sql reads ks_spans, a view of macros), so a small one's
    runs once and its result's rows are copied into the stream, which a large trace's memory could not afford."""
    if not small:
        return con.sql(statement).__arrow_c_stream__()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # DuckDB's note of the copy
        return con.execute(statement).to_arrow_reader().__arrow_c_stream__()
