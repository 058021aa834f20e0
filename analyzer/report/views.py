"""What the report shows of a run, read off the analyzer's views (report.sql, compare.sql): frames and facts that
the templates lay out as they are."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import duckdb
import pandas as pd

from ..diff import diff
from ..kernel_names import define_kernel_short
from ..ranks import header_gpu_names
from ..run import Run
from ..sql import run_sql_file
from ..tree import shown_tree_query

# The icicle folds the children under this share of the run (percent) into one node per parent: a large run's
# page stays small and quick to draw; hovering the folded node says how many it holds.
ICICLE_MIN_PCT = 0.05


@dataclass
class RunHeader:
    """What the page's header says of a run: its facts (manifest, trace header, totals, launch check)."""

    name: str
    facts: list[tuple[str, str]]
    launch_ok: bool
    trace: str | None
    totals: dict


@dataclass
class RunViews:
    """One run as the report shows it: its header and its views' rows, section by section."""

    header: RunHeader
    icicle: pd.DataFrame
    top_calls: pd.DataFrame
    summary: pd.DataFrame
    ops: pd.DataFrame
    samples: pd.DataFrame
    kernels: pd.DataFrame
    streams: pd.DataFrame


def run_header(run: Run, name: str) -> RunHeader:
    """The header of ``run``, from its manifest (or trace header), ks_report_totals and its launch check."""
    run_sql_file(run.con, "report/totals.sql")
    cursor = run.con.execute("SELECT * FROM ks_report_totals")
    totals = dict(zip([c[0] for c in cursor.description], cursor.fetchone(), strict=True))
    check = run.launch_check()
    return RunHeader(name, run_facts(run, totals, check), check.ok, trace_file(run), totals)


def run_views(run: Run, name: str) -> RunViews:
    """Every section's rows, from report.sql's views over ``run`` (all ranks together)."""
    con = run.con
    header = run_header(run, name)
    define_kernel_short(con)
    tree = shown_tree_query(run, None, min_pct=ICICLE_MIN_PCT, show_calls=True)
    con.execute(f"CREATE OR REPLACE TEMP TABLE ks_report_tree AS {tree}")  # read twice by ks_report_icicle
    run_sql_file(con, "report/report.sql")
    return RunViews(
        header=header,
        icicle=_frame(con, "ks_report_icicle"),
        top_calls=_frame(con, "ks_report_top_calls"),
        summary=_frame(con, "summary"),
        ops=_frame(con, "ks_report_ops"),
        samples=_frame(con, "ks_report_samples"),
        kernels=_frame(con, "ks_report_kernels"),
        streams=_frame(con, "ks_report_streams"),
    )


def run_facts(run: Run, totals: dict, check) -> list[tuple[str, str]]:
    """The header: what the manifest (or a bare trace's header) says the run is, its totals and its launch check."""
    manifest = run.manifest or {}
    keys = run.header.keys if run.header is not None else {}
    gpu = manifest.get("gpu_name") or next(iter(header_gpu_names(keys)), None)
    cuda = manifest.get("cuda_version") or _cuda_runtime(keys.get("cuda_runtime_version"))
    versions = manifest.get("torch_version") or cuda
    facts = [
        ("model", manifest.get("model")),
        ("command", " ".join(manifest.get("command_line") or []) or None),
        ("GPU", gpu if run.device == "cuda" else "none: a CPU recording (leaf operators stand in for kernels)"),
        ("torch / CUDA", " / ".join(v or "?" for v in (manifest.get("torch_version"), cuda)) if versions else None),
        ("recorded", manifest.get("start_time") or _base_time(keys.get("baseTimeNanoseconds"))),
        ("host", manifest.get("hostname")),
        ("ranks", ", ".join(map(str, run.ranks)) if len(run.ranks) > 1 else None),
        ("device time", f"{totals['total_us']:,.1f} µs in {totals['rows']:,} rows"),
        ("named", f"{totals['named_pct']:.1f}% inside a named call, {totals['in_module_pct']:.1f}% inside a module"),
        ("launch check", _launch_check(check)),
        ("tags", ", ".join(f"{k}={v}" for k, v in (manifest.get("tags") or {}).items()) or None),
        ("kernelscope", manifest.get("kernelscope_version")),
    ]
    return [(label, str(value)) for label, value in facts if value is not None]


def _launch_check(check) -> str:
    if check.ok:
        return f"ok: {check.launches:,} launches, each with its device events; no device event without its launch"
    return (
        f"the profiler lost events: {check.launches_without_device_event:,} launches without device event, "
        f"{check.device_events_without_launch:,} device events without launch"
    )


def _cuda_runtime(version) -> str | None:
    """A trace header's cuda_runtime_version (12040) as CUDA writes it (12.4)."""
    return f"{version // 1000}.{version % 1000 // 10}" if isinstance(version, int) and version > 0 else None


def _base_time(nanoseconds) -> str | None:
    if not isinstance(nanoseconds, int) or nanoseconds <= 0:
        return None
    return dt.datetime.fromtimestamp(nanoseconds / 1e9, dt.timezone.utc).isoformat(timespec="seconds")


def trace_file(run: Run) -> str | None:
    """The trace a person can open in Perfetto: the run directory's (the first rank's), or the bare trace itself;
    None for a run read from an archive, which keeps no trace file."""
    part = next(iter(run.parts.values()))
    if part.directory is not None and part.manifest is not None:
        return str(part.directory / part.manifest.get("files", {}).get("trace", "trace.json.gz"))
    if part.header is not None:
        return part.header.path
    return None


def comparison_views(a: Run, b: Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """diff(a, b) as compare.sql lays it out: the rows per level, regressions first, and the chart's functions."""
    diff_rows = diff(a, b)  # noqa: F841 (read by name below)
    con = duckdb.connect()
    try:
        define_kernel_short(con)
        con.register("diff_rows", diff_rows)
        run_sql_file(con, "report/compare.sql")
        return _frame(con, "ks_compare_rows"), _frame(con, "ks_compare_chart")
    finally:
        con.close()


def _frame(con: duckdb.DuckDBPyConnection, view: str) -> pd.DataFrame:
    """A view's rows with None for every missing value (NaN, NA), as the templates and JSON want them."""
    frame = con.execute(f"SELECT * FROM {view}").df()
    return frame.astype(object).where(frame.notna(), None)
