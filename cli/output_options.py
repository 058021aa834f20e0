"""The output switches shared by every query-like command: ``--format`` (or its short forms ``--csv``, ``--json``,
``--jsonl``, ``--parquet``, ``--table``, as sqlite-utils spells them), ``-o/--output`` and ``--force``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import click

from .output import FORMATS, INPUTS, Output
from .paths import UserPath


def output_options(command: Callable) -> Callable:
    """``--format`` (or a short form), ``-o/--output`` and ``--force`` for a command that prints DataFrames; the
    command receives them as one ``output: Output`` argument, checked before it runs."""

    @functools.wraps(command)
    def with_output(*args, output_format, output_path, output_force, **kwargs):
        output_format = _one_format(output_format, [fmt for fmt in FORMATS if kwargs.pop(f"as_{fmt}")])
        inputs = tuple(str(kwargs[name]) for name in INPUTS if kwargs.get(name) is not None)
        output = Output(output_format, output_path, output_force, inputs)
        output.check_destination()  # first: a file of the input is refused as one, whatever its name
        output.format  # noqa: B018 (an unknown or contradicted extension is refused before any work)
        return command(*args, output=output, **kwargs)

    for fmt in reversed(FORMATS):  # hidden: --format's help names them, and the list of options stays short
        with_output = click.option(f"--{fmt}", f"as_{fmt}", is_flag=True, hidden=True)(with_output)
    with_output = click.option("--force", "output_force", is_flag=True, help="Replace the output file if it exists.")(
        with_output
    )
    with_output = click.option(
        "-o",
        "--output",
        "output_path",
        type=UserPath(dir_okay=False, path_type=Path),
        default=None,
        help="Write to this file instead of stdout (format: --format, else the extension: "
        ".csv, .json, .jsonl/.ndjson, .parquet, .txt).",
    )(with_output)
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(FORMATS),
        default=None,
        help="table (default on stdout), csv, json (one array of records), jsonl (one record per line) "
        "or parquet (needs -o); --csv, --json, --jsonl, --parquet and --table are short for it.",
    )(with_output)


def _one_format(named: str | None, flags: list[str]) -> str | None:
    """The format that ``--format`` and the short forms name together; two different ones are a usage error."""
    chosen = {*flags, *([named] if named else [])}
    if len(chosen) > 1:
        given = [f"--format {named}"] if named else []
        raise click.UsageError(
            f"{' and '.join(given + [f'--{fmt}' for fmt in flags])} name different formats: give one"
        )
    return chosen.pop() if chosen else None
