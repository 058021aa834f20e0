"""``kernelscope report``: one self-contained HTML page of a run, or of run B against run A."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import click

from .interrupts import finishing
from .loading import check_rank, load_run_of, prefix_options, rank_option, run_option, warnings_as_lines
from .output import Output
from .paths import UserPath
from .printable import printable
from .rows import run_label

NOT_HTML = (".csv", ".json", ".jsonl", ".ndjson", ".parquet", ".txt", ".duckdb", ".pdf", ".png", ".svg", ".jpg")


@click.command(short_help="One HTML page of a run (or of B against A).")
@click.argument("run", type=UserPath(path_type=str))
@click.argument("run_b", required=False, type=UserPath(path_type=str))
@click.option(
    "-o",
    "--output",
    "output_path",
    type=UserPath(dir_okay=False, path_type=Path),
    default=None,
    help="The HTML file to write (default: ./<run>-report.html, ./<run_b>-vs-<run>-report.html).",
)
@click.option("--force", is_flag=True, help="Replace the output file if it exists.")
@click.option(
    "--archive",
    "archive_path",
    type=UserPath(file_okay=False, path_type=str),
    default=None,
    help="RUN (and RUN_B) are runs of this archive (ids, unique id prefixes or names).",
)
@rank_option
@run_option
@prefix_options
def report(
    run: str,
    run_b: str | None,
    output_path: Path | None,
    force: bool,
    archive_path: str | None,
    rank: int | None,
    run_ref: str | None,
    module_prefix: str | None,
    function_prefix: str | None,
) -> None:
    """Write the report of RUN (a run, a job of ranks, a trace, or an archived run with --run ID) as one HTML file
    that opens offline: the module tree as a zoomable icicle, the costliest calls, what each input signature
    costs, the costliest kernels. With RUN_B, the page comparing RUN_B against RUN (kernelscope diff's rows).

    \b
    Examples:
      kernelscope report RUN                    # ./RUN-report.html
      kernelscope report RUN -o report.html
      kernelscope report RUN_A RUN_B            # ./RUN_B-vs-RUN_A-report.html
    """
    from kernelscope.analyzer.report import write_comparison, write_report

    if archive_path is not None and run_ref is not None:
        raise click.UsageError("--run names the run of an ARCHIVE given as RUN; with --archive, RUN is the run")
    if rank is not None and run_b is not None:
        raise click.UsageError(
            "--rank reports one rank of RUN; the comparison of RUN_B against RUN compares whole runs"
        )
    names = [run] if run_b is None else [run, run_b]
    # an archived run (ARCHIVE --run ID) named after the run, as with --archive: each run of it a file of its own
    path = output_path or Path(_default_name(names if run_ref is None else [run_ref]))
    Output(path=path, force=force, inputs=tuple(n for n in (run, run_b, archive_path) if n)).check_destination()
    if output_path is not None and output_path.suffix.lower() in NOT_HTML:  # -o r.pdf held an HTML page
        named = output_path.suffix.lower().lstrip(".")
        raise click.UsageError(f"{output_path}: names a {named} file, and report writes one HTML page; name it .html")
    with ExitStack() as stack:
        if archive_path is None:
            refs = [(run, run_ref)] + ([(run_b, None)] if run_b else [])
        else:
            refs = [(archive_path, name) for name in names]
        option = "--run" if archive_path is None else "--archive"
        runs = [
            stack.enter_context(load_run_of(where, module_prefix, function_prefix, ref, archive_option=option))
            for where, ref in refs
        ]
        finishing(path)
        if run_b is None:
            check_rank(run, runs[0], rank)
            name = run_label(run, run_ref, runs[0], rank)  # an archived run by its id, as analyze titles it
            write_report(runs[0], path, name=name, rank=rank, progress=True, overwrite=force)
        else:
            with warnings_as_lines():  # runs of other devices or dtypes: as diff says it
                write_comparison(runs[0], runs[1], path, names=(run, run_b), progress=True, overwrite=force)
    click.echo(f"report: {printable(str(path))}")


def _default_name(names: list[str]) -> str:
    stems = [Path(name.rstrip("/")).name.split(".")[0] or "run" for name in names]
    return f"{stems[0]}-report.html" if len(stems) == 1 else f"{stems[1]}-vs-{stems[0]}-report.html"
