"""The recorded device time of each input sample of a call, nested calls included (call_times.sql): what a
replay of the call is compared with (``kernelscope bench``)."""

from __future__ import annotations

import pandas as pd

from .sql import define_scope_names, run_sql_file


def call_times(run, function: str) -> pd.DataFrame:
    """Per rank and sample of ``function``: ``calls``, ``recorded_us`` (the device time of all its calls in the
    recorded pass, the kernels of calls made inside them included) and ``pass_us`` (the rank's device time)."""
    define_scope_names(
        run.con,
        run.module_prefix,
        run.function_prefix,
        run.graph_replay_call,
        run.compiled_region_call,
        names_escaped=run.names_escaped,
    )
    frame = run_sql_file(run.con, "call_times.sql", function=function).df()
    return frame.astype({"rank": "int64", "sample_id": "int64", "calls": "int64"})
