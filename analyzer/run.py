"""A loaded run (a run directory or a bare trace) as DuckDB tables, and the API over them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from .errors import BadInputError
from .event_array import is_gzip
from .ingest import TraceHeader, ingest_trace
from .memory import default_memory_limit, json_bytes, limit_memory
from .rundir import FUNCTION_PREFIX, MODULE_PREFIX, SAMPLE_SEPARATOR, SAMPLES, TRACE, read_manifest
from .samples import function_data_from_store, read_samples, sample_totals_frame, samples_frame
from .sql import quote, run_sql_file, sql_text
from .summary import summarize

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
]
TEXT_COLUMNS = ["module_name", "function_name", "op", "kernel", "call_op", "kind"]
INTEGER_COLUMNS = ["device", "stream", "sample_id", "thread", "correlation"]


@dataclass(frozen=True)
class LaunchCheck:
    """Launches without their device event and device events without their launch: profiler losses."""

    launches: int
    device_events: int
    launches_without_device_event: int
    device_events_without_launch: int

    @property
    def ok(self) -> bool:
        return not (self.launches_without_device_event or self.device_events_without_launch)


class Run:
    """One recording in DuckDB: tables ``events``, ``kernels``, ``samples``, ``summary`` (docs/sql.md)."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        module_prefix: str | None = None,
        function_prefix: str | None = None,
        progress: bool = False,
        database: str = ":memory:",
        allow_empty: bool = False,
        memory_limit: int | str | None = None,
    ):
        path = Path(path)
        if path.is_dir():
            self.manifest: dict | None = read_manifest(path)
            trace = path / self.manifest.get("files", {}).get("trace", TRACE)
            store = read_samples(path / SAMPLES)
            annotation = self.manifest.get("annotation", {})
        elif path.exists():
            self.manifest, trace, store, annotation = None, path, {}, {}
        else:
            raise BadInputError(path, "no such run directory or trace file")
        self.path = path
        self.module_prefix = module_prefix or annotation.get("module_prefix", MODULE_PREFIX)
        self.function_prefix = function_prefix or annotation.get("function_prefix", FUNCTION_PREFIX)
        self.con = duckdb.connect(database)
        if memory_limit is None:
            memory_limit = default_memory_limit(json_bytes(trace, is_gzip(trace)) if trace.is_file() else 0)
        limit_memory(self.con, self, memory_limit)
        self.header: TraceHeader = ingest_trace(self.con, trace, progress=progress)
        self._function_data = function_data_from_store(store)
        self._build_tables()
        if not allow_empty and not self.con.execute("SELECT count(*) FROM kernels").fetchone()[0]:
            self.con.close()
            raise BadInputError(trace, "holds no device events (kernel, memcpy, memset) and no CPU operators")

    def _build_tables(self) -> None:
        con = self.con
        for name, value in (
            ("module_prefix", self.module_prefix),
            ("function_prefix", self.function_prefix),
            ("sample_separator", SAMPLE_SEPARATOR),
        ):
            con.execute(f"SET VARIABLE {name} = {quote(value)}")
        run_sql_file(con, "attribution.sql")
        samples = samples_frame(self._function_data)  # noqa: F841 (read by name below)
        sample_totals = sample_totals_frame(self._function_data)  # noqa: F841
        con.execute("CREATE OR REPLACE TABLE samples AS SELECT * FROM samples")
        con.execute("CREATE OR REPLACE TABLE sample_totals AS SELECT * FROM sample_totals")
        everything = sql_text("summary.sql").replace("getvariable('top_k')", "9223372036854775807")
        con.execute(f"CREATE OR REPLACE VIEW summary AS {everything}")

    @property
    def device(self) -> str:
        """'cuda' when the trace holds device events, else 'cpu' (leaf operators stand in for kernels)."""
        row = self.con.execute("SELECT count(*) FILTER (WHERE kind <> 'cpu'), count(*) FROM kernels").fetchone()
        return "cuda" if row[0] else "cpu"

    def profiling_df(self) -> pd.DataFrame:
        """One row per device event (SPEC §1 columns first), in device start order."""
        frame = self.con.execute(f"SELECT {', '.join(PROFILING_COLUMNS)} FROM kernels ORDER BY start_us, event_id").df()
        for column in TEXT_COLUMNS:  # missing scopes are None, as in aitune's frames, never a float NaN
            values = frame[column].astype(object)
            frame[column] = values.where(values.notna(), None)
        return frame.astype({column: "Int64" for column in INTEGER_COLUMNS})

    def function_data(self) -> dict:
        """``{function: [(calls, (args, kwargs)), ...]}`` with TensorMeta in place of tensors."""
        return self._function_data

    def describe(self, top_k: int = 10) -> pd.DataFrame:
        """describe_results of the whole run."""
        return summarize(self.con, top_k)

    def sql(self, query: str) -> pd.DataFrame:
        """Any SQL over the run's tables and views."""
        return self.con.execute(query).df()

    def launch_check(self) -> LaunchCheck:
        row = self.con.execute(sql_text("launch_check.sql")).fetchone()
        return LaunchCheck(*row)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load_run(
    path: str | os.PathLike,
    module_prefix: str | None = None,
    function_prefix: str | None = None,
    *,
    progress: bool = False,
    allow_empty: bool = False,
    memory_limit: int | str | None = None,
) -> Run:
    """Load a run directory or any Kineto trace (``.json``/``.json.gz``) for analysis.

    A trace with nothing to attribute (no device events, no CPU operators) is refused as bad input
    unless ``allow_empty`` (then the tables are empty). ``memory_limit`` (bytes, or DuckDB's "4GB") caps
    DuckDB's memory, beyond which it spills to a scratch directory; default 1.25x the trace's JSON.
    """
    for name, prefix in (("module_prefix", module_prefix), ("function_prefix", function_prefix)):
        if prefix is not None and not prefix:
            raise ValueError(f"{name} must not be empty")
    return Run(
        path,
        module_prefix=module_prefix,
        function_prefix=function_prefix,
        progress=progress,
        allow_empty=allow_empty,
        memory_limit=memory_limit,
    )
