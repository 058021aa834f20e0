"""``kernelscope diff``: run B against run A per function, module and kernel; a CI gate with --fail-above."""

from __future__ import annotations

import sys

import click
import pandas as pd

from .loading import load_run_of
from .output import Output, emit, output_options

REGRESSION_EXIT = 1


@click.command()
@click.argument("run_a", type=click.Path(path_type=str))
@click.argument("run_b", type=click.Path(path_type=str))
@click.option(
    "--archive",
    "archive_path",
    type=click.Path(file_okay=False, path_type=str),
    default=None,
    help="RUN_A and RUN_B are runs of this archive (ids, unique id prefixes or names).",
)
@click.option(
    "--level",
    "levels",
    type=click.Choice(["function", "module", "kernel"]),
    multiple=True,
    help="Only these levels (repeatable; default: all three). The total is always shown.",
)
@click.option("--top-k", type=click.IntRange(min=0), default=10, show_default=True, help="Rows per level; 0 = all.")
@click.option(
    "--fail-above",
    type=click.FloatRange(min=0),
    default=None,
    metavar="PCT",
    help="Exit with status 1 when the total or any function's time grew by more than PCT percent.",
)
@output_options
def diff(
    run_a: str,
    run_b: str,
    archive_path: str | None,
    levels: tuple[str, ...],
    top_k: int,
    fail_above: float | None,
    output: Output,
) -> None:
    """Compare RUN_B against RUN_A: time, calls, share, delta and ratio per function, module and kernel,
    most changed first (docs/sql.md, "diff")."""
    from kernelscope.analyzer.diff import diff as diff_runs
    from kernelscope.analyzer.diff import regressions

    if archive_path is None:
        a, b = load_run_of(run_a, None, None), load_run_of(run_b, None, None)
    else:
        a, b = load_run_of(archive_path, None, None, run_a), load_run_of(archive_path, None, None, run_b)
    with a, b:
        frame = diff_runs(a, b)
    shown = frame[frame["level"].isin(("total", *(levels or ("function", "module", "kernel"))))]
    if top_k:
        shown = shown.groupby("level", sort=False, group_keys=False).head(top_k)
    emit(shown.reset_index(drop=True), output, title=f"{run_b} against {run_a}")
    if fail_above is not None:
        failed = regressions(frame, fail_above)
        if len(failed):
            click.echo(f"kernelscope: regression above {fail_above:g}%: {_describe(failed)}", err=True)
            sys.exit(REGRESSION_EXIT)


def _describe(rows: pd.DataFrame) -> str:
    return ", ".join(
        f"{row.level}{'' if row.name is None else ' ' + str(row.name)} {row.delta_pct:+.1f}%"
        for row in rows.itertuples(index=False)
    )
