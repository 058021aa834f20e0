"""The output switches shared by every query-like command: a rich table, CSV or JSON, to stdout or a file."""

from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path

import click
import pandas as pd

FORMATS = ("table", "csv", "json")


def output_options(command):
    """``--format`` and ``-o/--output`` for a command that prints a DataFrame."""
    command = click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Write to this file instead of stdout (the format follows --format, or the file's extension).",
    )(command)
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default=None,
        help="table (default on stdout), csv or json (one object per row).",
    )(command)


def emit(frame: pd.DataFrame, fmt: str | None, output: Path | None, title: str | None = None) -> None:
    fmt = fmt or _format_from_name(output) or "table"
    if fmt == "table" and output is None:
        print_table(frame, title)
        return
    text = render(frame, fmt)
    if output is None:
        click.echo(text, nl=not text.endswith("\n"))
    else:
        write_atomically(output, text)


def _format_from_name(path: Path | None) -> str | None:
    if path is None:
        return None
    return {".csv": "csv", ".json": "json"}.get(path.suffix.lower(), "table")


def render(frame: pd.DataFrame, fmt: str) -> str:
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "json":
        return frame.to_json(orient="records", lines=True, double_precision=15)
    return frame.to_string(index=False) + "\n"


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary sibling, so a failure leaves no half file."""
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def print_table(frame: pd.DataFrame, title: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold")
    for column in frame.columns:
        numeric = pd.api.types.is_numeric_dtype(frame[column])
        table.add_column(str(column), justify="right" if numeric else "left", overflow="fold")
    for row in frame.itertuples(index=False):
        table.add_row(*(_cell(v) for v in row))
    Console(file=sys.stdout, width=None if sys.stdout.isatty() else 200).print(table)


def _cell(value) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.3f}"
    return str(value)
