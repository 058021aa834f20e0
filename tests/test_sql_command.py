"""kernelscope sql: the interactive prompt (no query), driven through stdin and through a terminal, and the
database kept with -o FILE.duckdb."""

import os
import pty
import select
import subprocess
import sys
import time

import duckdb
import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.analyzer import load_run
from kernelscope.cli import main

RUN = REPO / "sample_traces" / "mlp"


def test_the_prompt_runs_statements_until_quit():
    script = "SELECT count(*) AS n\n  FROM kernels;\nSELECT nope;\n.tables\nSELECT 41 + 1 AS answer;\n.quit\n"
    script += "SELECT 7;\n"
    result = CliRunner().invoke(main, ["sql", str(RUN)], input=script)
    assert "│ 6 │" in result.output, "a statement over two lines"
    assert "error: Binder Error" in result.output, "a failing statement prints its error and the prompt goes on"
    assert "events  kernels  module_calls  module_tree  sample_costs  sample_totals  samples  summary" in result.output
    assert "42" in result.output and "│ 7 │" not in result.output, ".quit stops reading"
    assert result.exit_code == 2, "piped input with a failing statement fails as a whole"
    assert result.output.strip().endswith("kernelscope: error: 1 statement of the input failed")


def test_end_of_input_runs_the_last_statement_without_semicolon():
    result = CliRunner().invoke(main, ["sql", str(RUN)], input="SELECT 5 * 5 AS x")
    assert result.exit_code == 0 and "25" in result.output


@pytest.mark.parametrize("word", ["exit", "quit", "QUIT;", "  exit ;"])
def test_exit_and_quit_end_the_prompt(word):
    result = CliRunner().invoke(main, ["sql", str(RUN)], input=f"SELECT 1 AS one;\n{word}\nSELECT 7 AS seven;\n")
    assert result.exit_code == 0 and "one" in result.output and "seven" not in result.output


@pytest.mark.parametrize(
    ("stdin", "said"),
    [("SELECT 1;\n\0\0\0", "holds a NUL character"), ("SELECT 1;\n" + "SELECT 1 " * 500, "runs past 2,000 characters")],
    ids=["NUL (/dev/zero)", "a statement without its end (yes SELECT)"],
)
def test_input_that_is_no_sql_text_is_refused_before_it_fills_the_memory(monkeypatch, stdin, said):
    """`sql RUN < /dev/zero` read one endless line: 5.5 GB in 20 s, until the machine's memory ran out."""
    from kernelscope import sql_command

    monkeypatch.setattr(sql_command, "MAX_STATEMENT_CHARS", 2000)
    result = CliRunner().invoke(main, ["sql", str(RUN)], input=stdin)
    assert result.exit_code == 2 and said in result.stderr, result.stderr
    assert result.stderr.splitlines()[-1] == "kernelscope: error: 1 statement of the input failed"


def test_a_failing_schema_command_fails_piped_input_as_a_failing_statement_does():
    result = CliRunner().invoke(main, ["sql", str(RUN)], input=".schema nope\nSELECT 1;\n")
    assert result.exit_code == 2 and "Table with name nope does not exist" in result.stderr
    assert result.stderr.splitlines()[-1] == "kernelscope: error: 1 statement of the input failed"


def test_several_statements_on_a_line_show_every_result():
    result = CliRunner().invoke(main, ["sql", str(RUN)], input="SELECT 11 AS a; SELECT 22 AS b;SELECT 33 AS c;\n")
    assert result.exit_code == 0
    assert [word in result.output for word in ("11", "22", "33")] == [True, True, True]


def test_a_query_argument_of_several_statements_runs_them_in_order_and_writes_the_last_result():
    query = "CREATE TEMP TABLE t AS SELECT 42 AS answer; INSERT INTO t VALUES (43); SELECT sum(answer) AS s FROM t"
    result = CliRunner().invoke(main, ["sql", str(RUN), query, "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["s", "85"]


def test_a_failing_statement_of_a_line_leaves_the_others_and_the_exit_status_says_so():
    result = CliRunner().invoke(main, ["sql", str(RUN)], input="SELECT 11 AS a; SELECT nope; SELECT 33 AS c;\n")
    assert "11" in result.output and "33" in result.output and "Binder Error" in result.output
    assert result.exit_code == 2


def _read_until(fd: int, marker: bytes, seen: bytearray, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while marker not in seen:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise AssertionError(f"no {marker!r} from the prompt; it printed: {bytes(seen)!r}")
        try:
            seen += os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            raise AssertionError(f"the prompt ended before {marker!r}; it printed: {bytes(seen)!r}") from None


def _at_a_terminal(state: str, keys: list[bytes]) -> str:
    """Run the prompt on a pseudo-terminal, type each of ``keys`` after the prompt shows, return what it printed."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the prompt on a terminal, history under a state directory of its own
        env = {**os.environ, "XDG_STATE_HOME": state, "TERM": "xterm", "COLUMNS": "100"}
        os.execve(sys.executable, [sys.executable, "-m", "kernelscope.cli", "sql", str(RUN)], env)
    seen, transcript = bytearray(), bytearray()
    try:
        for key in keys:
            _read_until(fd, b"> ", seen)
            transcript += seen
            seen.clear()
            os.write(fd, key)
        try:
            while chunk := os.read(fd, 65536):
                seen += chunk
        except OSError:  # the child ended and closed the terminal
            pass
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, bytes(transcript + seen)
    finally:
        os.close(fd)
    return (transcript + seen).decode(errors="replace")


def test_the_history_holds_each_statement_once_and_outlives_the_prompt(tmp_path):
    pytest.importorskip("readline")
    state = str(tmp_path / "state")
    _at_a_terminal(state, [b"SELECT 6 * 7\r", b"  AS answer;\r", b"SELECT 1 AS one;\r", b"quit\r"])
    history = (tmp_path / "state" / "kernelscope" / "sql_history").read_text().splitlines()
    assert [line for line in history if not line.startswith("_HiStOrY_V2_")][-3:] == [
        "SELECT 6 * 7 AS answer;",
        "SELECT 1 AS one;",
        "quit",
    ], "one entry per statement, kept in the state directory"
    # the next prompt recalls them: Ctrl-P twice goes back past "SELECT 1" to the two-line statement
    again = _at_a_terminal(state, [b"\x10\x10\x10\r", b"exit\r"])
    assert "answer" in again and "42" in again


def test_o_duckdb_keeps_the_database(tmp_path):
    target = tmp_path / "run.duckdb"
    result = CliRunner().invoke(main, ["sql", str(RUN), "-o", str(target)])
    assert result.exit_code == 0 and [p.name for p in tmp_path.iterdir()] == ["run.duckdb"]
    con = duckdb.connect(str(target), read_only=True)
    with load_run(RUN) as run:
        for table in ("events", "kernels", "samples", "sample_totals", "summary"):
            kept = con.execute(f"SELECT * FROM {table}").df()
            assert kept.equals(run.sql(f"SELECT * FROM {table}")), table
    con.close()
    refused = CliRunner().invoke(main, ["sql", str(RUN), "-o", str(target), "SELECT 1"])
    assert refused.exit_code == 2 and "already exists" in refused.output
    replaced = CliRunner().invoke(main, ["sql", str(RUN), "-o", str(target), "--force", "SELECT 3 AS three"])
    assert replaced.exit_code == 0 and "three" in replaced.output


def test_o_duckdb_with_a_failing_query_writes_nothing_and_keeps_the_file_there(tmp_path):
    """The query runs before the database is put in place: a query that fails leaves no database, and --force
    replaces the user's file only once the query has run."""
    target = tmp_path / "run.duckdb"
    failed = CliRunner().invoke(main, ["sql", str(RUN), "bad sql", "-o", str(target)])
    assert failed.exit_code == 2 and "the query failed: Parser Error" in failed.output
    assert "database:" not in failed.output
    assert list(tmp_path.iterdir()) == []
    target.write_text("the user's own")
    failed = CliRunner().invoke(main, ["sql", str(RUN), "SELECT nope FROM kernels", "-o", str(target), "--force"])
    assert failed.exit_code == 2 and "Binder Error" in failed.output
    assert [p.name for p in tmp_path.iterdir()] == ["run.duckdb"] and target.read_text() == "the user's own"


def test_the_prompt_needs_no_terminal_to_read_a_script_from_a_pipe():
    done = subprocess.run(
        [sys.executable, "-m", "kernelscope.cli", "sql", str(RUN)],
        input="SELECT 2 + 2 AS four;\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "4" in done.stdout and done.stderr == ""


def test_the_help_names_every_table_a_run_and_an_archive_hold(tmp_path):
    from kernelscope.analyzer import archive_runs

    archive = tmp_path / "archive"
    archive_runs([RUN], archive)
    help_text = " ".join(CliRunner().invoke(main, ["sql", "--help"]).output.split())
    for source in (RUN, archive):
        tables = CliRunner().invoke(main, ["sql", str(source)], input=".tables\n").output.split()
        assert tables and all(name in help_text for name in tables), (source, tables)
    assert "Examples:" in help_text


@pytest.mark.parametrize(
    "query, suggestion",
    [
        ("SELECT * FROM kernel", 'does not exist! Did you mean "kernels"?'),
        ("SELECT functon_name FROM summary", 'Candidate bindings: "function_name"'),
        ("SELECT * FROM nosuch", "does not exist! The tables: events, kernels, module_calls, module_tree,"),
    ],
)
def test_a_failing_query_keeps_duckdbs_suggestion_or_lists_the_tables(query, suggestion):
    result = CliRunner().invoke(main, ["sql", str(RUN), query])
    assert result.exit_code == 2 and suggestion in result.stderr and result.stderr.count("\n") == 1
    prompt = CliRunner().invoke(main, ["sql", str(RUN)], input=query + ";\n")
    assert suggestion in prompt.stderr, "the prompt's errors too"


def test_help_at_the_prompt_is_the_prompts_help():
    result = CliRunner().invoke(main, ["sql", str(RUN)], input="help\nSELECT 3 AS three;\n")
    assert result.exit_code == 0, result.output
    assert "Dot commands: .tables" in result.output and "three" in result.output and "error" not in result.output


@pytest.mark.parametrize("query", ["", "   ", ";;;", "-- a comment only\n", "/* nothing */ ;"])
@pytest.mark.parametrize("target", ["run", "archive"])
def test_a_query_of_no_statement_is_one_line(query, target, tmp_path):
    """DuckDB answers text without a statement with no result at all, which ended the command in a traceback."""
    from kernelscope.analyzer import archive_runs

    path = RUN
    if target == "archive":
        path = tmp_path / "arch"
        archive_runs([RUN], path)
    result = CliRunner().invoke(main, ["sql", str(path), "--", query])
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert result.stderr == "kernelscope: error: the query holds no SQL statement\n"


def test_the_api_answers_a_query_of_no_statement_with_the_same_sentence(tmp_path):
    from kernelscope.analyzer import Archive, KernelscopeError, archive_runs

    archive_runs([RUN], tmp_path / "arch")
    with load_run(RUN) as run:
        for sql in (run.sql, Archive(tmp_path / "arch").sql):
            with pytest.raises(KernelscopeError, match="the query holds no SQL statement"):
                sql(" ;\n-- nothing\n")


@pytest.mark.parametrize("args", [["--csv"], ["--format", "jsonl"], ["-o", "rows.csv"]])
def test_a_format_without_a_query_is_a_usage_error_not_ignored(args, tmp_path, monkeypatch):
    """`echo "SELECT …;" | kernelscope sql RUN --csv` printed the prompt's tables, its --csv ignored, and
    `sql RUN -o rows.csv` wrote nothing, with exit 0."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["sql", str(REPO / "sample_traces" / "demo"), *args], input="SELECT 1 AS a;\n")
    assert result.exit_code == 2 and "writes one query's result: give the QUERY" in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_missing_table_in_the_api_names_the_tables_there_are(tmp_path):
    """Run.sql("SELECT * FROM kernel") raised DuckDB's 'Did you mean "pg_enum or samples"?', a guess from its own
    catalog, where the command lists the run's tables; the exception (DuckDB's, as before) now carries them as a
    note, for the run and for an archive."""
    from kernelscope.analyzer import archive_runs
    from kernelscope.analyzer.archive import Archive

    archive_runs([REPO / "sample_traces" / "mlp"], tmp_path / "arch")
    with load_run(REPO / "sample_traces" / "mlp") as run, Archive(tmp_path / "arch") as archive:
        for source, tables in [(run, "The tables: events, kernels, "), (archive, "The tables: ")]:
            with pytest.raises(duckdb.CatalogException) as raised:
                source.sql("SELECT * FROM nope")
            assert any(note.startswith(tables) for note in getattr(raised.value, "__notes__", [])), raised.value


def test_the_prompts_help_tables_and_counts_fit_80_columns():
    """At the prompt, `.help` was one line of 151 characters and `.tables` 89, broken by an 80-column terminal inside
    a word; they wrap at spaces, every word kept. The count of the rows left out is written as every count is."""
    from rich.cells import cell_len

    script = ".help\n.tables\nSELECT i FROM range(70000) t(i);\n"
    result = CliRunner().invoke(main, ["sql", str(RUN)], input=script, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(map(cell_len, result.stdout.splitlines())) <= 80, result.stdout
    words = " ".join(result.stdout.split())
    assert "Dot commands: .tables, .schema NAME, .help (or help), .quit (or exit, quit, Ctrl-D)." in words
    assert "events kernels module_calls module_tree sample_costs sample_totals samples summary" in words
    assert "(69,800 more rows: add a LIMIT," in words


def test_a_dot_command_given_as_the_query_runs_as_at_the_prompt():
    """`kernelscope sql RUN .tables` (the help names .tables) went to DuckDB: 'Parser Error: syntax error at or near
    "."', exit 2."""
    tables = CliRunner().invoke(main, ["sql", str(RUN), ".tables"])
    assert (
        tables.exit_code == 0
        and tables.output.split() == CliRunner().invoke(main, ["sql", str(RUN)], input=".tables\n").output.split()
    )
    schema = CliRunner().invoke(main, ["sql", str(RUN), " .schema kernels"])
    assert schema.exit_code == 0 and "kernel_us" in schema.output and "DOUBLE" in schema.output
    written = CliRunner().invoke(main, ["sql", str(RUN), ".tables", "--format", "csv"])
    assert written.exit_code == 2 and "'.tables' is a command of the prompt" in written.stderr
