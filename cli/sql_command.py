"""``kernelscope sql``: one query, an interactive prompt (no query), or the database kept in a file
(``-o FILE.duckdb``), over a run's tables or an archive's."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
import duckdb
import pandas as pd

from .loading import load, prefix_options, run_option
from .output import Output, emit, output_options, print_table

SHELL_ROWS = 200
SHELL_HELP = (
    "End a statement with ';'. Dot commands: .tables, .schema NAME, .help, .quit (or Ctrl-D). "
    "The tables are described in docs/sql.md."
)


@click.command()
@click.argument("run", type=click.Path(path_type=str))
@click.argument("query", required=False)
@run_option
@prefix_options
@output_options
def sql(run: str, query: str | None, run_ref: str | None, module_prefix, function_prefix, output: Output) -> None:
    """Run QUERY over RUN's tables (events, kernels, samples, sample_totals, summary) or, for an archive,
    across its runs (runs, events, kernels, samples); see docs/sql.md.

    Without QUERY, an interactive prompt. With -o FILE.duckdb, the database is written to FILE.duckdb
    (open it with any DuckDB client), and QUERY, if given, is printed.
    """
    with load(run, module_prefix, function_prefix, run_ref) as loaded:
        if output.format == "duckdb":
            save_database(loaded.con, output.path)
            click.echo(f"database: {output.path}", err=True)
            if query is not None:
                emit(run_query(loaded.con, query))
            return
        if query is None:
            shell(loaded.con, run)
            return
        emit(run_query(loaded.con, query), output)


def run_query(con: duckdb.DuckDBPyConnection, query: str) -> pd.DataFrame:
    from kernelscope.analyzer.errors import KernelscopeError

    try:
        return con.execute(query).df()
    except duckdb.Error as exc:
        raise KernelscopeError(None, f"the query failed: {_first_line(exc)}") from None


def save_database(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Every table and view of ``con`` into a new DuckDB file at ``path``, through a temporary sibling. An archive's
    views name its files by absolute path, so the file opens from anywhere on this machine."""
    from kernelscope.analyzer.atomic import replace_atomically
    from kernelscope.analyzer.sql import quote

    def write(tmp: str) -> None:
        os.unlink(tmp)  # DuckDB creates the file itself
        try:
            source = con.execute("SELECT current_database()").fetchone()[0]
            con.execute(f"ATTACH {quote(tmp)} AS ks_saved")
            try:
                con.execute(f"COPY FROM DATABASE {source} TO ks_saved")
            finally:
                con.execute("DETACH ks_saved")
        except BaseException:
            Path(tmp + ".wal").unlink(missing_ok=True)
            raise

    replace_atomically(path, write)


def shell(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Read statements (ending in ';') and dot commands until .quit or end of input; print each result.
    A failing statement prints its error and the prompt goes on."""
    interactive = sys.stdin.isatty()
    if interactive:
        try:
            import readline  # noqa: F401 (line editing and history for input())
        except ImportError:
            pass
        click.echo(f"kernelscope sql: {name}\n{SHELL_HELP}")
    buffer: list[str] = []
    while True:
        try:
            line = input(("...> " if buffer else "ks> ") if interactive else "")
        except EOFError:
            break
        except KeyboardInterrupt:
            buffer = []
            click.echo()
            continue
        stripped = line.strip()
        if not buffer and stripped.startswith("."):
            if not _dot_command(con, stripped):
                return
            continue
        if stripped:
            buffer.append(line)
        if stripped.endswith(";"):
            _shell_statement(con, "\n".join(buffer))
            buffer = []
    if buffer:
        _shell_statement(con, "\n".join(buffer))


def _shell_statement(con: duckdb.DuckDBPyConnection, statement: str) -> None:
    try:
        frame = con.execute(statement).df()
    except duckdb.Error as exc:
        click.echo(f"error: {_first_line(exc)}", err=True)
        return
    print_table(frame.head(SHELL_ROWS))
    if len(frame) > SHELL_ROWS:
        click.echo(f"({len(frame) - SHELL_ROWS} more rows: add a LIMIT, or export with kernelscope sql ... -o FILE)")


def _dot_command(con: duckdb.DuckDBPyConnection, command: str) -> bool:
    """Run a dot command; False when it asks to quit."""
    word, _, argument = command.partition(" ")
    if word in (".quit", ".exit", ".q"):
        return False
    if word == ".tables":
        names = con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY 1"
        ).fetchall()
        click.echo("  ".join(name for (name,) in names))
    elif word == ".schema" and argument.strip():
        _shell_statement(con, f"DESCRIBE {argument.strip()}")
    else:
        click.echo(SHELL_HELP)
    return True


def _first_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
