"""``kernelscope sql``: one query, an interactive prompt (no query), or the database kept in a file
(``-o FILE.duckdb``), over a run's tables or an archive's."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .interrupts import ctrl_c_handled, finishing
from .loading import load, prefix_options, run_option
from .output import TERMINAL, Output, diagnostic, emit, print_note, print_table
from .output_options import output_options
from .paths import UserPath
from .rows import name_the_root
from .streamed_result import first_rows, print_result, rows_left
from .utf8_text import UTF8_TEXT, not_utf8

if TYPE_CHECKING:  # loaded where a command runs: --help and usage errors need none of it
    import duckdb
    import pandas as pd

SHELL_ROWS = 200
SHELL_HELP = (
    "End a statement with ';'. Dot commands: .tables, .schema NAME, .help (or help), .quit (or exit, quit, Ctrl-D). "
    "The tables are described in docs/sql.md."
)
QUIT_WORDS = ("exit", "quit")
# the most characters of one statement of the input: more is no SQL anyone types or a script holds, but /dev/zero or
# a binary file read as one endless line, which filled the memory
MAX_STATEMENT_CHARS = 16 << 20


@click.command(short_help="SQL over the tables of a run or an archive.")
@click.argument("run", type=UserPath(path_type=str))
@click.argument("query", required=False, type=UTF8_TEXT)
@run_option
@prefix_options
@output_options
def sql(run: str, query: str | None, run_ref: str | None, module_prefix, function_prefix, output: Output) -> None:
    """Run QUERY over RUN's tables and views (events, kernels, samples, sample_totals, sample_costs, summary,
    module_tree, module_calls) or, for an archive, across its runs (runs, events, kernels, samples); see
    docs/sql.md.

    QUERY may hold several statements separated by ';' (a CREATE TEMP TABLE, then a SELECT of it): they run in
    order and the last one's result is printed or written. Without QUERY, an interactive prompt, which prints every
    statement's result; a dot command as QUERY (.tables, .schema kernels) runs as at the prompt. With -o
    FILE.duckdb, the database is written to FILE.duckdb (open it with any DuckDB client), and QUERY, if given, is
    printed.

    \b
    Examples:
      kernelscope sql RUN "SELECT function_name, sum(kernel_us) AS us
                           FROM kernels GROUP BY ALL ORDER BY us DESC"
      kernelscope sql RUN              # the prompt: .tables, .schema kernels
      kernelscope sql ARCHIVE "SELECT run_id, count(*) FROM runs GROUP BY ALL"
    """
    from kernelscope.analyzer.errors import BadInputError, KernelscopeError

    if query is not None and not os.path.lexists(run) and os.path.lexists(query):
        raise BadInputError(run, "no such run directory or trace file; the run comes first: kernelscope sql RUN QUERY")
    dot_command = query.strip() if query is not None and query.strip().startswith(".") else None
    if dot_command is not None and (output.format != "table" or output.path is not None):
        raise click.UsageError(
            f"{dot_command!r} is a command of the prompt, which prints tables: leave out -o and --format, or write "
            "it in SQL (SHOW TABLES, DESCRIBE kernels)"
        )
    if query is None and output.format != "duckdb" and not output.to_terminal:  # the prompt printed tables, ignoring it
        given = f"-o {output.path}" if output.path is not None else f"--format {output.format}"
        raise click.UsageError(f"{given} writes one query's result: give the QUERY (the prompt prints tables)")
    with load(run, module_prefix, function_prefix, run_ref) as loaded:
        if output.format == "duckdb":
            finishing(output.path)
            # the query runs once the database is copied, before it is put in place: one that fails leaves nothing
            result = save_database(loaded.con, output.path, overwrite=output.force, then=query)
            diagnostic(f"database: {output.path}")
            if result is not None:
                emit(result)
            return
        if dot_command is not None:  # as the prompt runs it: the help names .tables and .schema
            _dot_command(loaded.con, dot_command)
            return
        if query is None:
            failed = shell(loaded.con, run)
            if failed and not sys.stdin.isatty():  # a script fed to the prompt fails as a whole
                raise KernelscopeError(None, f"{failed} statement{'s' if failed > 1 else ''} of the input failed")
            return
        if output.path is None:
            print_result(loaded.con, query, output, failed=lambda exc: _failed(exc, loaded.con))
        else:
            emit(name_the_root(run_query(loaded.con, query), output), output)


def run_query(con: duckdb.DuckDBPyConnection, query: str) -> pd.DataFrame:
    import duckdb
    from kernelscope.analyzer.user_queries import query_frame

    try:
        return query_frame(con, query)
    except duckdb.Error as exc:
        raise _failed(exc, con) from None


def _failed(exc: Exception, con: duckdb.DuckDBPyConnection) -> Exception:
    from kernelscope.analyzer.errors import KernelscopeError

    return KernelscopeError(None, f"the query failed: {_first_line(exc, con)}")


def save_database(
    con: duckdb.DuckDBPyConnection, path: Path, *, overwrite: bool = True, then: str | None = None
) -> pd.DataFrame | None:
    """Every table and view of ``con`` into a new DuckDB file at ``path``, through a temporary sibling. An archive's
    views name its files by absolute path, so the file opens from anywhere on this machine. ``then``: a query run on
    ``con`` after the copy and before the file is put in place (its result returned): where it fails, no file is."""
    import duckdb
    from kernelscope.analyzer.atomic import refuse_unless_utf8, replace_atomically, unwritten
    from kernelscope.analyzer.sql import quote

    refuse_unless_utf8(path, "a database")
    result = []

    def write(tmp: str) -> None:
        os.unlink(tmp)  # DuckDB creates the file itself
        try:
            source = con.execute("SELECT current_database()").fetchone()[0]
            con.execute(f"ATTACH {quote(tmp)} AS ks_saved")
            try:
                con.execute(f"COPY FROM DATABASE {source} TO ks_saved")
            finally:
                con.execute("DETACH ks_saved")
        except BaseException as exc:
            Path(tmp + ".wal").unlink(missing_ok=True)
            if isinstance(exc, duckdb.Error):  # a full disk: DuckDB's message names the temporary file
                raise unwritten(path, exc) from None
            raise
        if then is not None:
            result.append(run_query(con, then))

    replace_atomically(path, write, overwrite=overwrite)
    return result[0] if result else None


def shell(con: duckdb.DuckDBPyConnection, name: str) -> int:
    """Read statements (ending in ';') and dot commands until .quit, exit, quit or end of input; print the
    result of every statement, several on a line included. A failing statement prints its error and the
    prompt goes on; returns how many failed. At a terminal each statement is one history entry, kept in
    the user's state directory from one use of the prompt to the next."""
    interactive = sys.stdin.isatty()
    history = _History.open() if interactive else None
    if interactive:
        print_note(f"kernelscope sql: {name}")
        print_note(SHELL_HELP)
    buffer: list[str] = []
    failed = held = 0  # held: the characters of the statement read so far
    try:
        while True:
            try:
                line = _next_line(interactive, buffer)
            except EOFError:
                break
            except UnicodeDecodeError as exc:  # a locale of strict decoding; others hand the bytes on as surrogates
                diagnostic(f"error: the input is not UTF-8 text (the byte 0x{exc.object[exc.start]:02x})")
                return failed + 1
            except KeyboardInterrupt:  # Ctrl-C at the prompt drops the line
                ctrl_c_handled()
                buffer = []
                click.echo()
                continue
            held = held + len(line) if buffer else len(line)
            problem = _not_sql_text(line, held)
            if problem is not None:
                diagnostic(f"error: the input {problem}")
                return failed + 1
            stripped = line.strip()
            if not buffer and stripped.rstrip(";").strip().lower() in QUIT_WORDS:
                return failed
            if not buffer and stripped.rstrip(";").strip().lower() == "help":  # as exit and quit work bare
                stripped = ".help"
            if not buffer and stripped.startswith("."):
                done = _dot_command(con, stripped)
                if done is None:
                    return failed
                failed += done
                continue
            if stripped:
                buffer.append(line)
            if stripped.endswith(";"):
                failed += _shell_statements(con, "\n".join(buffer))
                if history is not None:
                    history.merge(len(buffer))
                buffer = []
        if buffer:
            failed += _shell_statements(con, "\n".join(buffer))
        return failed
    finally:
        if history is not None:
            history.save()


def _next_line(interactive: bool, buffer: list[str]) -> str:
    """The next line of the input, without its newline; at most MAX_STATEMENT_CHARS long where it is piped."""
    if interactive:
        return input("...> " if buffer else "ks> ")
    line = sys.stdin.readline(MAX_STATEMENT_CHARS + 1)
    if not line:
        raise EOFError
    return line.removesuffix("\n")


def _not_sql_text(line: str, held: int) -> str | None:
    """Why the input is no SQL text (its statement so far ``held`` characters long), or None."""
    if "\0" in line:
        return "holds a NUL character: it is not SQL text (a device or a binary file?)"
    if held > MAX_STATEMENT_CHARS:
        return f"runs past {MAX_STATEMENT_CHARS:,} characters without a statement's end (;): it is not SQL text"
    return None


class _History:
    """readline's history, one entry per statement (not per line), kept in a file under the user's state
    directory ($XDG_STATE_HOME/kernelscope, else ~/.local/state/kernelscope)."""

    LENGTH = 1000

    def __init__(self, readline, path: Path):
        self.readline, self.path = readline, path

    @classmethod
    def open(cls) -> _History | None:
        try:
            import readline  # line editing and history for input()
        except ImportError:
            return None
        state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "kernelscope"
        history = cls(readline, state / "sql_history")
        readline.set_history_length(cls.LENGTH)
        try:
            readline.read_history_file(history.path)
        except OSError:  # none yet, or unreadable: start empty
            pass
        return history

    def merge(self, lines: int) -> None:
        """Replace the last ``lines`` entries (the lines of one statement, as input() added them) by one."""
        readline = self.readline
        end = readline.get_current_history_length()
        if lines < 2 or end < lines:
            return
        parts = [readline.get_history_item(end - offset) for offset in range(lines - 1, -1, -1)]
        if any(part is None or "--" in part for part in parts):  # a line comment would swallow what follows it
            return
        for position in range(end - 1, end - lines - 1, -1):
            readline.remove_history_item(position)
        readline.add_history(" ".join(part.strip() for part in parts))

    def save(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.readline.write_history_file(self.path)
        except OSError:  # a read-only home: the prompt works without keeping its history
            pass


def _shell_statements(con: duckdb.DuckDBPyConnection, text: str) -> int:
    """Run every statement of ``text`` and print each result (the root module named as rows.name_the_root names it);
    returns how many failed."""
    import duckdb

    why = not_utf8(text)
    if why is not None:
        diagnostic(f"error: the input {why}")
        return 1
    try:
        statements = con.extract_statements(text)
    except duckdb.Error as exc:
        diagnostic(f"error: {_first_line(exc)}")
        return 1
    failed = 0
    for statement in statements:
        try:  # the first rows are shown before the rest is counted: SELECT * FROM events of a large trace is long
            result = con.execute(statement)
            frame = first_rows(result, SHELL_ROWS + 1)
            print_table(name_the_root(frame.head(SHELL_ROWS), TERMINAL), every_column="select fewer to see them")
            if len(frame) > SHELL_ROWS:
                more = len(frame) - SHELL_ROWS + rows_left(result)
                print_note(f"({more:,} more rows: add a LIMIT, or export with kernelscope sql ... -o FILE)")
        except duckdb.Error as exc:
            diagnostic(f"error: {_first_line(exc, con)}")
            failed += 1
            continue
        except (KeyboardInterrupt, RuntimeError):  # DuckDB's error for a query Ctrl-C stopped is a RuntimeError
            if not ctrl_c_handled():
                raise
            diagnostic("error: interrupted")  # the prompt goes on; the statements after this one are dropped
            return failed + 1
    return failed


def _dot_command(con: duckdb.DuckDBPyConnection, command: str) -> int | None:
    """Run a dot command; how many of its statements failed (a .schema of no table fails piped input as a failing
    statement does), or None when it asks to quit."""
    word, _, argument = command.partition(" ")
    if word in (".quit", ".exit", ".q"):
        return None
    if word == ".tables":
        print_note("  ".join(_tables(con)))
    elif word == ".schema" and argument.strip():
        return _shell_statements(con, f"DESCRIBE {argument.strip()}")
    else:
        print_note(SHELL_HELP)
    return 0


HINTS = ("Did you mean", "Candidate bindings")  # DuckDB's own suggestion, on the line after its message


def _first_line(exc: Exception, con: duckdb.DuckDBPyConnection | None = None) -> str:
    """DuckDB's message on one line, with its suggestion (``Did you mean "kernels"?``) where it makes one, not the
    query it quotes after them; for a table that does not exist, the tables there are (DuckDB's guess may be one of
    its own catalog's, ``pg_sequences``)."""
    from kernelscope.analyzer.user_queries import NO_TABLE

    lines = str(exc).strip().splitlines()
    if not lines:
        return type(exc).__name__
    hint = next((line.strip() for line in lines[1:3] if line.strip().startswith(HINTS)), None)
    if con is not None and lines[0].startswith(NO_TABLE) and (hint is None or "pg_" in hint):
        hint = f"The tables: {', '.join(_tables(con))}."
    return lines[0] if hint is None else f"{lines[0]} {hint}"


def _tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    from kernelscope.analyzer.user_queries import table_names

    return table_names(con)
