"""Text arguments that are not UTF-8 (a shell's $'\\xff', a Latin-1 terminal): Python hands them on as surrogates,
which DuckDB cannot take. A prefix, a run id or a query of such bytes ended in a TypeError or DuckDB traceback; it is
one line naming the argument, exit 2. Paths stay free: a folder of Latin-1 bytes is a run like any other."""

import os

import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.cli import main

RUN = str(REPO / "sample_traces" / "mlp")
LATIN = os.fsdecode(b"lin\xe9ar")


def _cli(*args: str, stdin: bytes | None = None):
    done = CliRunner().invoke(main, list(args), input=stdin, prog_name="kernelscope")
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    return done


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["analyze", RUN, "--module-prefix", LATIN], "--module-prefix"),
        (["tree", RUN, "--function-prefix", LATIN], "--function-prefix"),
        (["sql", RUN, f"SELECT '{LATIN}'"], "QUERY"),
        (["analyze", RUN, "--run", LATIN], "--run"),
    ],
    ids=["module prefix", "function prefix", "query", "run id"],
)
def test_a_text_argument_not_utf8_is_one_line_and_exit_2(args, option):
    done = _cli(*args)
    assert done.exit_code == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("kernelscope: error: ") and option in line and "is not UTF-8 text" in line, line


def test_statements_on_stdin_not_utf8_fail_as_one_statement():
    done = _cli("sql", RUN, stdin=b"SELECT 1;\nSELECT '\xff';\n")
    assert done.exit_code == 2 and "Traceback" not in done.stderr
    assert "not UTF-8 text" in done.stderr and done.stderr.splitlines()[-1].startswith("kernelscope: error:")


def test_a_run_named_by_bytes_not_utf8_in_an_archive_is_no_run(tmp_path):
    """diff and report take an archive's runs as arguments of their own (paths elsewhere): such a name is no run."""
    archive = tmp_path / "archive"
    assert _cli("archive", RUN, "--to", str(archive)).exit_code == 0
    done = _cli("diff", "--archive", str(archive), LATIN, "mlp")
    assert done.exit_code == 2 and done.stderr.splitlines() == [
        f"kernelscope: error: {archive}: holds no run {LATIN!r} (kernelscope runs {archive} lists them)"
    ]
