"""``kernelscope diff``: run B against run A per function, module and kernel; a CI gate with --fail-above."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from .choices import DIFF_LEVEL
from .loading import load_run_of, prefix_options, warnings_as_lines
from .numbers import NON_NEGATIVE
from .output import Output, diagnostic, emit
from .output_options import output_options
from .paths import UserPath
from .rows import (
    FULL_NAMES,
    TOP_K,
    first_rows,
    name_the_root,
    note_levels_left_out,
    rows_to_show,
    shorten_kernel_names,
)

if TYPE_CHECKING:  # loaded where a command runs: --help and usage errors need none of it
    import pandas as pd

REGRESSION_EXIT = 1


@click.command(short_help="Compare two runs: function, module, kernel.")
@click.argument("run_a", type=UserPath(path_type=str))
@click.argument("run_b", type=UserPath(path_type=str))
@click.option(
    "--archive",
    "archive_path",
    type=UserPath(file_okay=False, path_type=str),
    default=None,
    help="RUN_A and RUN_B are runs of this archive (ids, unique id prefixes or names).",
)
@click.option(
    "--level",
    "levels",
    type=DIFF_LEVEL,
    multiple=True,
    help="Only these levels (repeatable; default: all three). The total is always shown.",
)
@TOP_K
@click.option(
    "--fail-above",
    type=NON_NEGATIVE,
    default=None,
    metavar="PCT",
    help="Exit with status 1 when the total or any function's time grew by more than PCT percent "
    "(every function counts, shown or not).",
)
@FULL_NAMES
@prefix_options
@output_options
def diff(
    run_a: str,
    run_b: str,
    archive_path: str | None,
    levels: tuple[str, ...],
    top_k: int | None,
    fail_above: float | None,
    full_names: bool,
    module_prefix: str | None,
    function_prefix: str | None,
    output: Output,
) -> None:
    """Compare RUN_B against RUN_A: time, calls, share, delta and ratio per function, module and kernel,
    most changed first (docs/sql.md, "diff").

    \b
    Examples:
      kernelscope diff runs/base runs/new
      kernelscope diff runs/base runs/new --fail-above 5   # exit 1 past +5%
      kernelscope diff --archive ARCHIVE ID_A ID_B
    """
    from kernelscope.analyzer.diff import diff as diff_runs
    from kernelscope.analyzer.diff import regressions

    if archive_path is None:
        pick = "compare two of its runs with kernelscope diff --archive {archive} ID_A ID_B"
        a = load_run_of(run_a, module_prefix, function_prefix, pick=pick)
        b = load_run_of(run_b, module_prefix, function_prefix, pick=pick)
        title = f"{run_b} against {run_a}"
    else:
        a = load_run_of(archive_path, module_prefix, function_prefix, run_a, archive_option="--archive")
        b = load_run_of(archive_path, module_prefix, function_prefix, run_b, archive_option="--archive")
        title = f"{archive_path}: {run_b} against {run_a}"
    with a, b, warnings_as_lines():
        frame = diff_runs(a, b)
    chosen = frame[frame["level"].isin(("total", *(levels or ("function", "module", "kernel"))))]
    shown = first_rows(chosen.reset_index(drop=True), rows_to_show(top_k, output), by="level")
    shown = shorten_kernel_names(shown, output, full_names, column="name", only=shown["level"] == "kernel")
    shown = name_the_root(shown, output)
    emit(shown, output, title=title)
    if output.to_terminal:
        levels_shown = ("function", "module", "kernel")
        note_levels_left_out(
            [(level, (shown["level"] == level).sum(), (chosen["level"] == level).sum()) for level in levels_shown]
        )
    if fail_above is not None:
        failed = regressions(frame, fail_above)
        if len(failed):
            diagnostic(f"kernelscope: regression above {fail_above:g}%: {_describe(failed)}")
            sys.exit(REGRESSION_EXIT)


def _describe(rows: pd.DataFrame) -> str:
    return ", ".join(
        f"{row.level}{'' if row.name is None else ' ' + str(row.name)} "
        + ("new in B" if row.delta_pct == float("inf") else f"{row.delta_pct:+.1f}%")
        for row in rows.itertuples(index=False)
    )
