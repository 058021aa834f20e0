"""What the report shows of a run, read off the analyzer's views (report.sql, compare.sql): frames and facts that
the templates lay out as they are."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pandas as pd

from ..connection import new_connection
from ..diff import diff
from ..kernel_names import define_kernel_short
from ..ranks import header_gpu_names, trace_start
from ..run import Run
from ..sql import run_sql_file, sql_template
from ..summary import summary_query
from ..tree import shown_tree_query

# The relations report.sql and totals.sql read: the run's views (a job's ranks together), or one rank's (one_rank.sql).
WHOLE_RUN = {"kernels": "kernels", "summary": "summary", "sample_costs": "sample_costs"}
ONE_RANK = {"kernels": "ks_rank_kernels", "summary": "ks_rank_summary", "sample_costs": "ks_rank_sample_costs"}

# The icicle folds the children under this share of the run (percent) into one node per parent: a large run's
# page stays small and quick to draw; hovering the folded node says how many it holds.
ICICLE_MIN_PCT = 0.05


@dataclass
class RunHeader:
    """What the page's header says of a run: its facts (manifest, trace header, totals, launch check)."""

    name: str
    facts: list[tuple[str, str]]
    launch_ok: bool
    traces: list[tuple[int, str]]  # each rank's trace file, none for a run read from an archive
    totals: dict
    device: str = "cuda"  # "cpu": its rows are CPU operators, which launch nothing (Run.device)
    prefixes: tuple[str, str] = ("ks.module:", "ks.fn:")  # the scope name prefixes the run was read with


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


def report_relations(run: Run, rank: int | None) -> dict[str, str]:
    """The relations the report's SQL reads for ``rank`` (None: the whole run), its one-rank views defined."""
    if rank is None:
        return WHOLE_RUN
    con = run.con
    con.execute(f"SET VARIABLE ks_rank = {run._rank(rank)}")
    run_sql_file(con, "report/one_rank.sql")
    summary = summary_query(kernels=ONE_RANK["kernels"], sample_totals="ks_rank_sample_totals")
    con.execute(f"CREATE OR REPLACE TEMP VIEW ks_rank_summary AS {summary}")
    return ONE_RANK


def _run_report_sql(run: Run, name: str, relations: dict[str, str]) -> None:
    run.con.execute(sql_template(name).substitute(relations))


def run_header(run: Run, name: str, rank: int | None = None) -> RunHeader:
    """The header of ``run`` (or of its rank ``rank``), from its manifest (or trace header), ks_report_totals and
    its launch check."""
    _run_report_sql(run, "report/totals.sql", report_relations(run, rank))
    cursor = run.con.execute("SELECT * FROM ks_report_totals")
    totals = dict(zip([c[0] for c in cursor.description], cursor.fetchone(), strict=True))
    check = run.launch_check() if rank is None else run.parts[rank].check
    facts = run_facts(run, totals, check, rank)
    prefixes = (run.module_prefix, run.function_prefix)
    return RunHeader(name, facts, check.ok, trace_files(run, rank), totals, run.device, prefixes)


def run_views(run: Run, name: str, rank: int | None = None) -> RunViews:
    """Every section's rows, from report.sql's views over ``run``: all ranks together, or the rank ``rank``."""
    con = run.con
    header = run_header(run, name, rank)  # defines the one-rank views too
    relations = WHOLE_RUN if rank is None else ONE_RANK
    define_kernel_short(con)
    tree = shown_tree_query(run, rank, min_pct=ICICLE_MIN_PCT, show_calls=True)
    con.execute(f"CREATE OR REPLACE TEMP TABLE ks_report_tree AS {tree}")  # read twice by ks_report_icicle
    _run_report_sql(run, "report/report.sql", relations)
    return RunViews(
        header=header,
        icicle=_frame(con, "ks_report_icicle"),
        top_calls=_frame(con, "ks_report_top_calls"),
        summary=_frame(con, relations["summary"]),
        ops=_frame(con, "ks_report_ops"),
        samples=_frame(con, "ks_report_samples"),
        kernels=_frame(con, "ks_report_kernels"),
        streams=_frame(con, "ks_report_streams"),
    )


def run_facts(run: Run, totals: dict, check, rank: int | None = None) -> list[tuple[str, str]]:
    """The header: what the manifest (or a bare trace's header) says the run (or its rank ``rank``) is, its totals
    and its launch check."""
    part = run.parts[rank] if rank is not None else None
    manifest = (run.manifest if part is None else part.manifest) or {}
    header = run.header if part is None else part.header
    keys = header.keys if header is not None else {}
    gpu = manifest.get("gpu_name") or next(iter(header_gpu_names(keys)), None)
    cuda = manifest.get("cuda_version") or _cuda_runtime(keys.get("cuda_runtime_version"))
    versions = manifest.get("torch_version") or cuda
    facts = [
        ("model", manifest.get("model")),
        ("command", " ".join(manifest.get("command_line") or []) or None),
        ("GPU", gpu if run.device == "cuda" else "none: a CPU recording (leaf operators stand in for kernels)"),
        _versions(manifest.get("torch_version"), cuda, run.device) if versions else (None, None),
        ("recorded", manifest.get("start_time") or trace_start(run.con, keys, run.ranks[0] if rank is None else rank)),
        ("host", manifest.get("hostname")),
        ("ranks", ", ".join(map(str, run.ranks)) if len(run.ranks) > 1 and rank is None else None),
        ("rank", f"{rank} of the job's {', '.join(map(str, run.ranks))}" if rank is not None else None),
        _time(totals, run.device),
        ("named", f"{totals['named_pct']:.1f}% inside a named call, {totals['in_module_pct']:.1f}% inside a module"),
        ("launch check", _launch_check(check, run.device)),
        ("tags", ", ".join(f"{k}={v}" for k, v in (manifest.get("tags") or {}).items()) or None),
        ("kernelscope", manifest.get("kernelscope_version")),
    ]
    return [(label, str(value)) for label, value in facts if value is not None]


def _time(totals: dict, device: str) -> tuple[str, str]:
    """The run's time and rows, named as the command line's footer names them: a CPU recording's rows are CPU
    operators, which no device ran."""
    if device == "cpu":
        return ("CPU operator time", f"{totals['total_us']:,.1f} µs in {totals['rows']:,} CPU operator rows")
    return ("device time", f"{totals['total_us']:,.1f} µs in {totals['rows']:,} rows")


def _versions(torch_version: str | None, cuda: str | None, device: str) -> tuple[str, str]:
    """The torch and CUDA versions; a CPU recording by a torch without CUDA is its torch version alone (``2.13.0+cpu
    / ?`` read as a CUDA version unknown)."""
    if device == "cpu" and cuda is None:
        return ("torch", torch_version or "?")
    return ("torch / CUDA", " / ".join(v or "?" for v in (torch_version, cuda)))


def _launch_check(check, device: str) -> str:
    if check.ok and check.launches == 0 and device == "cpu":  # not "ok: 0 launches, each with its device events"
        return "none to check: a CPU recording launches no kernels"
    if check.ok:
        return f"ok: {check.launches:,} launches, each with its device events; no device event without its launch"
    return check.losses()


def _cuda_runtime(version) -> str | None:
    """A trace header's cuda_runtime_version (12040) as CUDA writes it (12.4)."""
    return f"{version // 1000}.{version % 1000 // 10}" if isinstance(version, int) and version > 0 else None


def trace_files(run: Run, rank: int | None = None) -> list[tuple[int, str]]:
    """The traces a person can open in Perfetto, by rank: each run directory's (every rank's, or ``rank``'s), or
    the bare trace itself; none for a run read from an archive, which keeps no trace file."""
    files = []
    for number, part in run.parts.items():
        if rank is not None and number != rank:
            continue
        if part.directory is not None and part.manifest is not None:
            files.append((number, str(part.directory / part.manifest.get("files", {}).get("trace", "trace.json.gz"))))
        elif part.header is not None:
            files.append((number, part.header.path))
    return files


def comparison_views(a: Run, b: Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """diff(a, b) as compare.sql lays it out: the rows per level, regressions first, and the chart's functions."""
    diff_rows = diff(a, b)  # noqa: F841 (read by name below)
    con = new_connection()
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
