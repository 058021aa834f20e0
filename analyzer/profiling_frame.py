"""profiling_df's frame (SPEC §1 columns first), built from DuckDB's numpy arrays of table ``kernels``."""

from __future__ import annotations

from collections.abc import Callable

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
NAMED_KEYS_BELOW = -(2**62)  # a thread the trace names by a string has a key below this (ingest.sql), none other
INTEGER_COLUMNS = ["device", "stream", "sample_id", "thread", "correlation", "call_event_id"]  # nullable: Int64


ThreadNames = Callable[[list[int]], dict[int, str]]


def profiling_frame(columns: dict[str, np.ndarray], thread_names: ThreadNames) -> pd.DataFrame:
    """The frame of ``fetchnumpy()``'s arrays of the PROFILING_COLUMNS, with ``thread_name`` after ``thread``: the
    name the trace gave the thread where it named it by a string (``thread_names``: key -> name of the named keys
    given), else None."""
    frame = {name: _column(name, columns[name]) for name in PROFILING_COLUMNS}
    frame["thread_name"] = _thread_names(columns["thread"], thread_names)
    after = PROFILING_COLUMNS.index("thread") + 1
    order = PROFILING_COLUMNS[:after] + ["thread_name"] + PROFILING_COLUMNS[after:]
    return pd.DataFrame({name: frame[name] for name in order}, copy=False)


def _thread_names(threads: np.ndarray, thread_names: ThreadNames) -> np.ndarray:
    """Each row's thread name, looked up only where a row's thread is a named key (Kineto names a few threads,
    "Spans" and "Traces", that launch nothing: most traces look up none)."""
    keys = np.ma.getdata(threads)
    named = (keys < NAMED_KEYS_BELOW) & ~np.ma.getmaskarray(threads)
    names = np.full(len(keys), None, dtype=object)
    if named.any():
        found = thread_names(np.unique(keys[named]).tolist())
        names[named] = [found.get(key) for key in keys[named].tolist()]
    return names


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
