"""Compare two runs per function, module and kernel: time, calls, share, delta and ratio (diff.sql)."""

from __future__ import annotations

import os

import duckdb
import pandas as pd

from .run import Run, load_run
from .sql import define_scope_names, sql_text

LEVELS = ("total", "function", "module", "kernel")


def diff(a: Run | str | os.PathLike, b: Run | str | os.PathLike) -> pd.DataFrame:
    """Run ``b`` against run ``a`` (each a Run or a path ``load_run`` reads): one row per level and name
    (``level`` total, function, module or kernel), sorted by absolute delta within each level."""
    side_a = _totals(a)  # noqa: F841 (read by name below)
    side_b = _totals(b)  # noqa: F841
    con = duckdb.connect()
    try:
        con.register("side_a", side_a)
        con.register("side_b", side_b)
        frame = con.execute(sql_text("diff.sql")).df()
    finally:
        con.close()
    frame["name"] = frame["name"].astype(object).where(frame["name"].notna(), None)
    return frame.astype({"calls_a": "Int64", "calls_b": "Int64"})


def regressions(frame: pd.DataFrame, above_pct: float) -> pd.DataFrame:
    """The rows of a diff that gate a CI run: the total or a function whose time grew by more than
    ``above_pct`` percent (something new in B counts as infinitely more). Time outside any function is
    in the total, not gated by itself."""
    gated = frame[(frame["level"] == "total") | ((frame["level"] == "function") & frame["name"].notna())]
    return gated[gated["delta_pct"].fillna(0.0) > above_pct]


def _totals(run: Run | str | os.PathLike) -> pd.DataFrame:
    if isinstance(run, Run):
        return _side(run)
    with load_run(run) as loaded:
        return _side(loaded)


def _side(run: Run) -> pd.DataFrame:
    con = run.con
    define_scope_names(
        con,
        run.module_prefix,
        run.function_prefix,
        run.graph_replay_call,
        run.compiled_region_call,
        run.other_operator_call,
    )
    return con.execute(sql_text("diff_side.sql")).df()
