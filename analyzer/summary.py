"""The per-function summary (describe_results), computed by summary.sql over two DataFrames."""

from __future__ import annotations

import duckdb
import pandas as pd

from .connection import new_connection
from .rundir import GRAPH_REPLAY_CALL, OTHER_OPERATOR_CALL
from .samples import sample_totals_frame
from .sql import quote, sql_template

SUMMARY_COLUMNS = [
    "function_name",
    "calls",
    "num_distinct_samples",
    "num_modules",
    "time_spent_us",
    "time_spent_pct",
    "tensor_size_MB",
]


def summary_query(top_k: int | None = None, kernels: str = "kernels", sample_totals: str = "sample_totals") -> str:
    """summary.sql's text: the ``top_k`` first functions (None: all of them) of the relations ``kernels`` and
    ``sample_totals`` (the run's, or one rank's views of one_rank.sql: names from this package, never user input)."""
    text = sql_template("summary.sql").substitute(
        graph_replay_call=quote(GRAPH_REPLAY_CALL),
        other_operator_call=quote(OTHER_OPERATOR_CALL),
        kernels=kernels,
        sample_totals=sample_totals,
    )
    return text.replace("getvariable('top_k')", str(2**63 - 1 if top_k is None else int(top_k)))


def summarize(con: duckdb.DuckDBPyConnection, top_k: int | None) -> pd.DataFrame:
    """Run summary.sql on ``con``'s ``kernels`` (with ``rank``, ``correlation``, ``call_event_id``) and
    ``sample_totals``; ``top_k=None``: every function."""
    if top_k is not None and top_k < 0:
        raise ValueError("top_k must be >= 0")
    frame = con.execute(summary_query(top_k)).df()
    return frame.astype({"function_name": object, "num_modules": "int64"})


def describe_results(profiling_df: pd.DataFrame, function_data: dict, top_k: int | None = 10) -> pd.DataFrame:
    """One row per function, most expensive first, at most ``top_k`` (None: all), of any profiling_df (in-process,
    offline, or filtered by the user): function_name, calls, num_distinct_samples, num_modules, time_spent_us,
    time_spent_pct, tensor_size_MB (docs/sql.md, summary)."""
    con = new_connection()
    try:
        kernels = profiling_df[["module_name", "function_name", "kernel_us"]].assign(
            rank=profiling_df["rank"] if "rank" in profiling_df else 0,
            correlation=profiling_df["correlation"] if "correlation" in profiling_df else None,
            call_event_id=profiling_df["call_event_id"] if "call_event_id" in profiling_df else None,
        )
        sample_totals = sample_totals_frame(function_data)
        con.register("kernels", kernels)
        con.register("sample_totals", sample_totals)
        return summarize(con, top_k)
    finally:
        con.close()
