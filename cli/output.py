"""Where a query-like command's rows go: a rich table, CSV, JSON or Parquet, to stdout or a file (written
atomically, never over an existing file without ``--force``); the switches that choose it are output_options.py."""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .interrupts import finishing

if TYPE_CHECKING:  # pandas loads in the functions that take a frame: --help and usage errors need none of it
    import pandas as pd

FORMATS = ("table", "csv", "json", "jsonl", "parquet")
SUFFIXES = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".txt": "table",
    ".duckdb": "duckdb",
}


@dataclass(frozen=True)
class Output:
    """Where and how a command's DataFrame goes: ``--format``, ``-o/--output``, ``--force``."""

    fmt: str | None = None
    path: Path | None = None
    force: bool = False
    inputs: tuple[str, ...] = ()  # the paths the command reads: --force replaces none of their files

    @property
    def format(self) -> str:
        """``--format`` (not where the extension names another: readers fail on such a file), else the extension's."""
        from kernelscope.analyzer.errors import KernelscopeError

        named = None if self.path is None else SUFFIXES.get(self.path.suffix.lower())
        if self.fmt and named not in (None, "table", self.fmt):
            problem = f"names a {named} file, and --format asks for {self.fmt}; rename it, or leave --format out"
            raise KernelscopeError(self.path, problem)
        if self.fmt or self.path is None:
            return self.fmt or "table"
        if named is None:
            known = ", ".join(suffix for suffix in SUFFIXES if suffix != ".duckdb")
            problem = f"has an extension kernelscope does not write ({known}); or name the format with --format"
            raise KernelscopeError(self.path, problem)
        return named

    @property
    def to_terminal(self) -> bool:
        return self.format == "table" and self.path is None

    def check_destination(self) -> None:
        """Fail before any work when the output would replace a file without --force."""
        if self.path is None:
            return
        from kernelscope.analyzer.atomic import refuse_unless_regular
        from kernelscope.analyzer.errors import KernelscopeError, OutputExistsError

        if self.path.is_dir():
            raise KernelscopeError(self.path, "is a directory, not a file to write")
        if (self.path.exists() or self.path.is_symlink()) and not self.force:
            raise OutputExistsError(self.path, "already exists; choose another name, or replace it with --force")
        refusal = input_holding(self.path, self.inputs) if self.path.exists() else None
        if refusal is not None:
            raise KernelscopeError(self.path, refusal)
        refuse_unless_regular(self.path)  # even with --force: never /dev/null, a FIFO or a link replaced
        if not (self.path.parent if str(self.path.parent) else Path(".")).is_dir():
            raise KernelscopeError(self.path.parent, "is not an existing directory to write the output into")


TERMINAL = Output()
INPUTS = ("run", "run_a", "run_b", "archive_path")  # the parameters of the commands that name what they read


def input_holding(path: Path, inputs: tuple[str, ...]) -> str | None:
    """Why ``--force`` may not replace the existing file ``path``: it is an input of the command (a trace), or lies
    inside one (a run, job, trace or archive folder), which replacing it would damage (``analyze RUN -o
    RUN/trace.json.gz --force``); None where it is neither. (A hard link elsewhere is only a name: the rename that
    replaces it leaves the input's file as it was.)"""
    try:
        target = path.resolve()
    except OSError:
        return None
    for given in inputs:
        try:
            source = Path(given).resolve()
        except OSError:
            continue
        if target == source:
            return f"is {given}, which this command reads; write the output elsewhere"
        if source.is_dir() and target.is_relative_to(source):
            return f"is inside {given}, which this command reads: --force replaces no file there; write it elsewhere"
    return None


def diagnostic(line: str) -> None:
    """``line`` (an error, warning or note) on stderr as one line of plain characters: a name it quotes from a trace,
    a manifest or a folder cannot end the line, forge another or drive the terminal (its control characters are
    escaped, as in a table)."""
    from .printable import printable

    click.echo(printable(line), err=True)


def print_note(text: str, console=None) -> None:
    """A line under a table (what it left out, where the time went, a hint) on stdout, wrapped at spaces to the
    table's width, ``console``'s: an 80-column terminal broke a longer one inside a word. A word is never cut."""
    from .printable import printable

    click.echo("\n".join(wrapped(printable(text), wrap_width(console or stdout_console()))))


def wrap_width(console) -> int:
    """The width a note or title wraps at: the terminal's, or COLUMNS where set; piped without COLUMNS a line stays
    whole, as a script reading the output expects (one title line, however long)."""
    piped = not sys.stdout.isatty() and not os.environ.get("COLUMNS", "").isdigit()
    return sys.maxsize if piped else console.width


def wrapped(text: str, width: int) -> list[str]:
    """``text``'s lines of at most ``width`` characters, broken at spaces only: a path or an option stays whole."""
    import textwrap

    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]


def emit(frame: pd.DataFrame, output: Output = TERMINAL, title: str | None = None, **table) -> None:
    """Print or write ``frame`` as ``output`` asks (``table``: print_table's options)."""
    fmt = output.format  # read once: it checks the extension against --format
    if fmt == "table" and output.path is None:
        print_table(frame, title, **table)
        return
    if fmt == "duckdb":
        raise click.UsageError(f"{output.path}: only `kernelscope sql` writes a DuckDB database")
    if output.path is None:
        if fmt == "parquet":
            raise click.UsageError("--format parquet needs -o FILE (Parquet is binary)")
        # to a terminal, a name's control characters are escaped as in a table; piped, the text is exact (click's
        # echo would strip the ANSI sequences of names where stdout is not a terminal)
        text = render(escaped(frame) if sys.stdout.isatty() else frame, fmt)
        click.echo(text, nl=not text.endswith("\n"), color=True)
        return
    finishing(output.path)
    if fmt == "parquet":
        return write_parquet(output.path, frame, overwrite=output.force)
    write_atomically(output.path, render(frame, fmt), overwrite=output.force)


def escaped(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the control characters of its texts escaped."""
    import pandas as pd

    from .printable import printable

    texts = [c for c in frame.columns if frame[c].dtype == object or pd.api.types.is_string_dtype(frame[c])]
    return frame.assign(**{c: frame[c].map(lambda v: printable(v) if isinstance(v, str) else v) for c in texts})


def render(frame: pd.DataFrame, fmt: str, header: bool = True) -> str:
    """``frame`` as text; without ``header``, CSV's rows only (a block after the first)."""
    from .json_output import json_text, nested_as_text

    if fmt in ("json", "jsonl"):
        return json_text(frame, lines=fmt == "jsonl")
    frame = nested_as_text(frame)
    if fmt == "csv":  # 15 significant digits: 754.82, not 754.8199999999997; 53, not 53.0
        return frame.to_csv(index=False, float_format=_csv_number, header=header)
    return text_table(frame)


def text_table(frame: pd.DataFrame) -> str:
    """``frame`` as a table written to a file (``-o rows.txt``): the terminal table's texts (table_cells: 14 calls,
    not 14.0), in aligned columns, names left and numbers right, a row per line for grep and diff."""
    from .printable import printable

    headers, numerics, cells = table_cells(frame)
    cells = [[printable(text) for text in column] for column in cells]
    widths = [max([len(header), *map(len, column)]) for header, column in zip(headers, cells, strict=True)]

    def line(texts) -> str:
        padded = (t.rjust(w) if n else t.ljust(w) for t, w, n in zip(texts, widths, numerics, strict=True))
        return "  ".join(padded).rstrip()

    return "".join(line(row) + "\n" for row in [headers, *zip(*cells, strict=True)])


def _csv_number(value: float) -> str:
    return "0" if value == 0 else f"{value:.15g}"  # -0.0 too


def write_atomically(path: Path, text: str, *, overwrite: bool = True) -> None:
    """``text`` to ``path`` through a temporary sibling (no half file); without ``overwrite``, over no file at all."""
    from kernelscope.analyzer.atomic import replace_atomically

    replace_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"), overwrite=overwrite)


def write_parquet(path: Path, frame: pd.DataFrame, *, overwrite: bool = True) -> None:
    """``frame`` as a Parquet file, written by DuckDB (no pyarrow needed), atomically."""
    import duckdb
    from kernelscope.analyzer.atomic import refuse_unless_utf8, replace_atomically, unwritten
    from kernelscope.analyzer.connection import new_connection
    from kernelscope.analyzer.sql import quote

    refuse_unless_utf8(path, "a Parquet file")

    def write(tmp: str) -> None:
        con = new_connection()
        try:
            con.register("frame", frame)
            con.execute(f"COPY frame TO {quote(tmp)} (FORMAT parquet)")
        except duckdb.Error as exc:  # a full disk: DuckDB's message names its temporary file
            raise unwritten(path, exc) from None
        finally:
            con.close()

    replace_atomically(path, write, overwrite=overwrite)


PIPED_COLUMNS = 200  # a table piped to a file or a pager is not cut to a terminal's width, unless COLUMNS says


def stdout_console(**options):
    """A rich console on stdout (when piped: COLUMNS wide where it is set, else 200) that leaves a closed pipe to
    the command (cli.py ends quietly), where rich's own exits with status 1."""
    from rich.console import Console

    class PipedConsole(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    options.setdefault("width", None if sys.stdout.isatty() else _piped_width())
    _replace_what_stdout_cannot_encode()
    return PipedConsole(file=sys.stdout, **options)


def _replace_what_stdout_cannot_encode() -> None:
    """A table or tree on a stdout that is not UTF-8 (a Latin-1 locale, PYTHONIOENCODING=ascii) shows a character
    its encoding lacks (the ``…`` of a cut name, ``µs``) as ``?``, where writing it raised UnicodeEncodeError.
    Only the text for people is printed through a console: csv and json are written as they are."""
    encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower().replace("_", "-")
    if not encoding.startswith("utf") and hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")


def _piped_width() -> int:
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_COLUMNS


def print_table(
    frame: pd.DataFrame, title: str | None = None, every_column: str | None = "--format csv shows them"
) -> None:
    """A rich table of ``frame``; every text (names from a trace among them) as plain text, never as rich markup,
    its control characters escaped. Columns that cannot fit the terminal are left out from the right, with a line
    naming them and ``every_column``, where to see them (None: a table of columns that all count, folded instead)."""
    from rich.table import Table
    from rich.text import Text

    from .long_table import draws_long_table, print_long_table
    from .printable import printable
    from .table_layout import column_leasts, folded_header, header_folds, left_out_note, table_width, that_fit

    headers, numerics, cells = table_cells(frame)
    console = stdout_console()
    if title:  # a line of its own: a table's title wraps at the table's width (a narrow table, a long path)
        for line in wrapped(printable(title), wrap_width(console)):
            console.print(line, style="table.title", soft_wrap=True, markup=False, highlight=False)
    if draws_long_table(console, len(frame)):
        texts = [[printable(v) for v in values] for values in cells]
        print_long_table(console, headers, texts, numerics, every_column)
        return
    # the columns that do not fit even with their names folded as narrow as column_leasts allows are left out
    widests = [max(map(len, values), default=0) for values in cells]
    leasts = column_leasts(headers, numerics, widests)
    shown = len(headers) if every_column is None else that_fit(headers, leasts, console.width)
    left_out = headers[shown:]
    headers, numerics, cells, widests, leasts = (part[:shown] for part in (headers, numerics, cells, widests, leasts))
    folds = header_folds(headers, widests, leasts, console.width)
    minimums = [
        max(least, len(h) if fold is None else fold) for h, least, fold in zip(headers, leasts, folds, strict=True)
    ]
    table = Table(header_style="bold")
    for header, numeric, minimum, fold in zip(headers, numerics, minimums, folds, strict=True):
        table.add_column(
            Text(header if fold is None else folded_header(header, fold)),
            justify="right" if numeric else "left",
            overflow="fold",
            min_width=minimum,
        )
    for row in zip(*cells, strict=True) if cells else ():
        table.add_row(*(Text(printable(cell)) for cell in row))
    needed = table_width(minimums)
    if needed > console.width:  # the first column alone is wider than the terminal
        console = stdout_console(width=needed)
    console.print(table, crop=False)  # rich crops a table its columns' minimums make wider than the console
    if left_out:
        print_note(left_out_note(console.width, left_out, every_column), console)


def table_cells(frame: pd.DataFrame, digits: dict[str, int] | None = None) -> tuple[list, list, list]:
    """``frame``'s headers, which columns are numbers, and each column's texts as a table shows them. ``digits``:
    the decimals each float column was shown with before (a result printed block by block), never fewer here,
    updated with this block's."""
    import pandas as pd

    from .json_output import nested_as_text
    from .printable import printable

    frame = nested_as_text(frame)
    headers, numerics, cells = [], [], []
    for column in frame.columns:
        numeric = pd.api.types.is_numeric_dtype(frame[column]) and not pd.api.types.is_bool_dtype(frame[column])
        values = _format_column(str(column), frame[column], digits) if numeric else [_text(v) for v in frame[column]]
        headers.append(printable(str(column)))
        numerics.append(numeric)
        cells.append(values)
    return headers, numerics, cells


MEASURES = ("_us", "_pct", "_MB", "ratio")  # columns of times, shares, sizes and ratios: always with decimals
ERRORS = ("_err",)  # an alternative's errors, 2.34e-04 of a float32 result: 3 significant digits, never 0.000


def _format_column(name: str, values: pd.Series, digits_seen: dict[str, int] | None = None) -> list[str]:
    """One number format per column: times, shares, sizes and ratios with three decimals; errors with three
    significant digits; other columns whose every value is whole (counts such as ``calls``, NaN where unknown) as
    integers; a value that rounds to zero is 0, never -0.000. An integer column prints its values exactly (a
    nanosecond timestamp since the epoch is past the 2**53 a float holds exactly)."""
    import pandas as pd

    if name.endswith(ERRORS):
        return ["-" if _missing(v) else f"{float(v):.3g}" for v in values]
    if pd.api.types.is_integer_dtype(values.dtype):
        decimals = ".000" if name.endswith(MEASURES) else ""
        return ["-" if _missing(v) else f"{int(v):,}{decimals}" for v in values]
    finite = [float(v) for v in values if not _missing(v) and math.isfinite(float(v))]
    whole = all(v.is_integer() and abs(v) < 1e15 for v in finite)
    digits = 3 if name.endswith(MEASURES) or not whole else 0
    if digits_seen is not None:
        digits = digits_seen[name] = max(digits, digits_seen.get(name, 0))
    return [_number(v, digits) for v in values]


def _number(value, digits: int) -> str:
    if _missing(value):
        return "-"
    value = float(value)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = f"{value:,.{digits}f}"
    return text.lstrip("-") if float(text.replace(",", "")) == 0 else text


def _missing(value) -> bool:
    import pandas as pd  # loaded: the value is a frame's

    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))


def _text(value) -> str:
    return "-" if _missing(value) else str(value)
