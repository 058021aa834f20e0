"""The per-function summary (describe_results), computed by summary.sql over two DataFrames."""

from __future__ import annotations

import duckdb
import pandas as pd

from .samples import sample_totals_frame
from .sql import sql_text

SUMMARY_COLUMNS = [
    "function_name",
    "calls",
    "num_distinct_samples",
    "num_modules",
    "time_spent_us",
    "time_spent_pct",
    "tensor_size_MB",
]


def summarize(con: duckdb.DuckDBPyConnection, top_k: int) -> pd.DataFrame:
    """Run summary.sql on ``con``'s ``kernels`` and ``sample_totals`` relations."""
    if top_k < 0:
        raise ValueError("top_k must be >= 0")
    con.execute(f"SET VARIABLE top_k = {int(top_k)}")
    frame = con.execute(sql_text("summary.sql")).df()
    return frame.astype({"function_name": object, "num_modules": "int64"})


def describe_results(profiling_df: pd.DataFrame, function_data: dict, top_k: int = 10) -> pd.DataFrame:
    """describe_results of SPEC §1 for any profiling_df (in-process, offline, or filtered by the user)."""
    con = duckdb.connect()
    try:
        kernels = profiling_df[["module_name", "function_name", "kernel_us"]]
        sample_totals = sample_totals_frame(function_data)
        con.register("kernels", kernels)
        con.register("sample_totals", sample_totals)
        return summarize(con, top_k)
    finally:
        con.close()
