"""profiling_df's frame (SPEC §1 columns first), built from DuckDB's numpy arrays of table ``kernels``."""

from __future__ import annotations

import numpy as np
import pandas as pd

PROFILING_COLUMNS = [
    "module_name",
    "function_name",
    "op",
    "kernel",
    "kernel_us",
    "call_op",
    "kind",
    "device",
    "stream",
    "sample_id",
    "start_us",
    "thread",
    "correlation",
    "event_id",
    "call_event_id",
    "rank",
]
TEXT_COLUMNS = ["module_name", "function_name", "op", "kernel", "call_op", "kind"]
INTEGER_COLUMNS = ["device", "stream", "sample_id", "thread", "correlation", "call_event_id"]  # nullable: Int64


def profiling_frame(columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """The frame of ``fetchnumpy()``'s arrays of the PROFILING_COLUMNS."""
    return pd.DataFrame({name: _column(name, columns[name]) for name in PROFILING_COLUMNS}, copy=False)


def _column(name: str, values: np.ndarray) -> pd.Series | pd.api.extensions.ExtensionArray | np.ndarray:
    """A column of profiling_df from DuckDB's numpy arrays (masked where NULLs are): text as objects with None for a
    missing scope, as in aitune's frames (never a float NaN), nullable integers as Int64. Built directly: converting
    a DataFrame column by column cost more than the query on a small run."""
    data, missing = np.ma.getdata(values), np.ma.getmaskarray(values)
    if name in TEXT_COLUMNS:
        return pd.Series(np.where(missing, None, data) if missing.any() else data, dtype=object, copy=False)
    if name in INTEGER_COLUMNS:
        return pd.arrays.IntegerArray(data.astype("int64", copy=False), missing)
    if missing.any():  # never for the columns left (event_id, rank, times), which kernels always holds
        return np.where(missing, np.nan, data)
    return data
