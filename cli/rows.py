"""What a table shows: how many rows (``--top-k``), kernels' short names, the root module's name, and the lines under
a table that say what it left out and where its time went."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .numbers import ROWS
from .output import Output, diagnostic, print_note

if TYPE_CHECKING:  # loaded where a command runs: --help and usage errors need none of it
    import pandas as pd

TABLE_ROWS = 10  # --top-k's default in a table; csv, json, jsonl and parquet get every row unless --top-k is given

TOP_K = click.option(
    "--top-k",
    type=ROWS,
    default=None,
    help=f"Rows to show; 0 = all [default: {TABLE_ROWS} on the terminal, all in a file or csv/json/jsonl/parquet].",
)
SUMMARY_ROWS = click.option(  # demo and record print one table of the summary, to the terminal only
    "--top-k",
    type=ROWS,
    default=None,
    help=f"Rows of the summary to show; 0 = all [default: {TABLE_ROWS}].",
)
FULL_NAMES = click.option(
    "--full-names", is_flag=True, help="Kernels' full names in tables (default: short names, docs/analysis.md)."
)


# for joins in SQL (and the name a trace gave a thread); csv, json and parquet keep them
KERNEL_LINKS = ["device", "thread", "thread_name", "correlation", "event_id"]


def kernel_table(frame: pd.DataFrame, output: Output) -> pd.DataFrame:
    """The columns of ``--kernels`` a table has room for: the links back to ``events`` are left to the files."""
    return frame.drop(columns=KERNEL_LINKS) if output.format == "table" else frame


def rows_to_show(top_k: int | None, output: Output) -> int | None:
    """The number of rows a table keeps; None for all of them. A file gets every row by default, a table in a
    ``.txt`` file too: nothing under it would say what a cut one left out."""
    if top_k is None:
        return TABLE_ROWS if output.to_terminal else None
    return None if top_k == 0 else top_k


def first_rows(frame: pd.DataFrame, limit: int | None, by: str | None = None) -> pd.DataFrame:
    """The first ``limit`` rows of ``frame`` (of each ``by`` group), in the analyzer's order."""
    if limit is None:
        return frame
    if by is None:
        return frame.head(limit)
    return frame.groupby(by, sort=False, group_keys=False).head(limit).reset_index(drop=True)


def note_rows_left_out(shown: int, total: int, what: str) -> None:
    if shown < total:
        print_note(f"{shown:,} of {total:,} {what} shown; --top-k 0 shows all.")


def note_levels_left_out(counts: list[tuple[str, int, int]]) -> None:
    """One line for the levels of a table cut by ``--top-k``: ``(level, shown, total)`` each."""
    cut = [f"{shown} of {total} {level}" for level, shown, total in counts if shown < total]
    if cut:
        print_note(f"{', '.join(cut)} rows shown; --top-k 0 shows all.")


def shorten_kernel_names(
    frame: pd.DataFrame, output: Output, full_names: bool, column: str = "kernel", only: pd.Series | None = None
) -> pd.DataFrame:
    """Tables show kernels by their short names (csv, json and parquet keep the full ones); ``only`` selects
    the rows whose ``column`` is a kernel name."""
    if full_names or output.format != "table" or column not in frame or frame.empty:
        return frame
    from kernelscope.analyzer.kernel_names import short_kernel_names

    rows = frame[column].notna() if only is None else only & frame[column].notna()
    names = short_kernel_names(frame.loc[rows, column])
    frame = frame.copy()
    frame.loc[rows, column] = frame.loc[rows, column].map(names)
    return frame


MODULE_COLUMNS = ("module_name", "module", "parent")  # what holds a module's name in a table: "" is the root


def run_label(run: str, run_ref: str | None, loaded, rank: int | None = None) -> str:
    """What a title names: the path, an archive's run by its id, and the rank when one was picked."""
    label = run if run_ref is None else f"{run} --run {loaded.path.name.removeprefix('run_id=')}"
    return label if rank is None else f"{label} --rank {rank}"


def root_name(run: str, rank: int | None = None) -> str:
    """What the tree's top line calls the root module (whose ``module_name`` is ""): the run it is the model of."""
    return run if rank is None else f"{run} (rank {rank})"


ROOT_IN_TABLES = "(root)"  # a table's name for the root module: no module path holds parentheses


def name_the_root(frame: pd.DataFrame, output: Output, root: str = ROOT_IN_TABLES) -> pd.DataFrame:
    """A table shows the root module as ``root``, where its name "" would be a blank cell: in the columns of module
    names and, in a diff, the names of the rows of level module. csv, json and parquet keep "", the name the SQL tables
    and DataFrames give it."""
    import pandas as pd

    if output.format != "table" or frame.empty:
        return frame
    # infer_dtype skips the NULLs of rows outside any module, which make an object column no string dtype to pandas
    columns = [c for c in MODULE_COLUMNS if c in frame and pd.api.types.infer_dtype(frame[c], skipna=True) == "string"]
    diffed = "level" in frame and "name" in frame
    if not columns and not diffed:
        return frame
    frame = frame.copy()
    for column in columns:
        frame.loc[frame[column].eq(""), column] = root
    if diffed:
        frame.loc[frame["level"].eq("module") & frame["name"].eq(""), "name"] = root
    return frame


def print_footer(run, rank: int | None = None, rows_shown: bool = False) -> None:
    """Where the time of the run (or of one rank) went outside the table: totals, the share outside any named
    call (and where to see it, unless the table is the rows themselves), profiler losses."""
    where = "" if rank is None else f"WHERE rank = {int(rank)}"
    total, in_function, rows = run.con.execute(
        "SELECT coalesce(sum(kernel_us), 0), coalesce(sum(kernel_us) FILTER (WHERE function_name IS NOT NULL), 0), "
        f"count(*) FROM kernels {where}"
    ).fetchone()
    inside = 100.0 * in_function / total if total else 0.0
    outside = max(0.0, 100.0 * (total - in_function) / total) if total else 0.0  # never -0.0 from rounding
    what = "device" if run.device == "cuda" else "CPU operator"
    scope = "" if rank is None else f"rank {rank}: "
    counted = f"{rows:,} {what} {'row' if rows == 1 else 'rows'}"  # 10,133 like the times; 1 row
    print_note(
        f"{scope}{counted}, {total:,.1f} µs in all; {inside:.1f}% inside a named call, "
        f"{outside:.1f}% outside any{'' if rows_shown else ' (see --kernels)'}."
    )
    check = run.launch_check() if rank is None else run.parts[rank].check
    if not check.ok:
        diagnostic(f"kernelscope: warning: {check.losses()}.")
