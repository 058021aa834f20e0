"""``kernelscope archive`` (add runs to an archive of Parquet) and ``kernelscope runs`` (list them)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from .interrupts import finishing
from .loading import prefix_options, warnings_as_lines
from .output import Output, emit
from .output_options import output_options
from .paths import UserPath
from .printable import printable, shell_word
from .rows import TOP_K, note_rows_left_out, rows_to_show

SUBCOMMANDS = ("add", "list", "ls", "create", "new", "init")  # words a user may try as `kernelscope archive add ...`
LISTING = ("list", "ls")  # of those, the ones that ask for what `kernelscope runs` does


@click.command(short_help="Add runs to an archive of Parquet files.")
@click.argument("sources", metavar="RUN...", nargs=-1, required=True, type=UserPath(path_type=str))
@click.option(
    "--to",
    "archive_path",
    type=UserPath(file_okay=False, path_type=Path),
    help="The archive folder (created when missing); required.",
)
@prefix_options
def archive(sources: tuple[str, ...], archive_path: Path, module_prefix, function_prefix) -> None:
    """Add runs (run directories, job directories of ranks, traces) to an archive of hive-partitioned Parquet.

    A run already in the archive (same files, same id) is left as it is.

    \b
    Examples:
      kernelscope archive runs/base runs/new --to archive/
      kernelscope runs archive/
      kernelscope sql archive/ "SELECT run_id, sum(kernel_us) FROM kernels
                                GROUP BY ALL"
    """
    from kernelscope.analyzer.archive import Archive
    from kernelscope.analyzer.errors import BadInputError

    listing = f"; kernelscope runs {shell_word(sources[-1])} lists an archive's runs" if sources[0] in LISTING else ""
    if archive_path is None:  # checked here, not by click: `archive list ARCHIVE` is told where listing is
        raise click.UsageError(f"Missing option '--to': the archive to add the runs to{listing}")
    for source in sources:  # before the archive is made: a mistyped run leaves no empty archive behind
        if not os.path.lexists(source):
            verb = source in SUBCOMMANDS and "; kernelscope archive takes the runs themselves: archive RUN... --to DIR"
            raise BadInputError(source, f"no such run directory or trace file{listing or verb or ''}")
    store = Archive(archive_path, create="on add")
    for number, source in enumerate(sources, 1):
        if number == len(sources):
            finishing(archive_path)
        with warnings_as_lines():
            run_id, added = store.add(source, module_prefix=module_prefix, function_prefix=function_prefix)
        click.echo(f"{run_id}  {printable(source)}: " + ("archived" if added else "already in the archive, unchanged"))
    click.echo(f"next: kernelscope runs {shell_word(str(archive_path))}")


@click.command(short_help="List the runs of an archive.")
@click.argument("archive_path", metavar="ARCHIVE", type=UserPath(file_okay=False, path_type=Path))
@TOP_K
@output_options
def runs(archive_path: Path, top_k: int | None, output: Output) -> None:
    """List the runs of an archive, oldest first: id, name, time, ranks, hosts, GPU, versions, git commit, tags,
    totals. A table shows the newest --top-k (a fleet's archive holds thousands); files get every run.

    \b
    Examples:
      kernelscope runs archive/
      kernelscope analyze archive/ --run ID     # by id, id prefix or name
    """
    from kernelscope.analyzer.archive import Archive

    with Archive(archive_path) as store:
        listed = store.runs()
    limit = rows_to_show(top_k, output)
    shown = listed if limit is None else listed.tail(limit)
    emit(shown, output, title=f"{archive_path}: runs")
    note_rows_left_out(len(shown), len(listed), "runs (the newest)")
