"""Text a run directory or a path brings (a manifest's device name, a call's name, a folder's name) reaches generated
code and SQL only as data: it can neither end a script's docstring nor a SQL comment and run as code."""

import ast
import json
import os
import shutil
import warnings

import pytest
from kernelscope.analyzer import load_run
from kernelscope.analyzer.call_times import call_times

HOSTILE = 'cpu"""\nraise SystemExit("injected")\n"""\\N{x} \x1b'  # ends a docstring, then a bad escape


def test_a_crafted_device_name_and_run_path_stay_inside_the_benchmark_scripts_docstring(layouts_run, tmp_path):
    """manifest.json's device and the run's path are written into each --scripts file's docstring: a quote, newline,
    backslash or byte that is not UTF-8 in them is escaped, so the script parses to the docstring and nothing else
    before its imports (a triple quote once ended the docstring and ran the manifest's text as code)."""
    pytest.importorskip("torch")
    from kernelscope.recorder.bench import bench

    run_dir = tmp_path / os.fsdecode(b"run-\xe9")  # a Latin-1 folder name: not UTF-8 text
    shutil.copytree(layouts_run[1], run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["device"] = HOSTILE
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    with load_run(run_dir) as run, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bench(run, ["gelu"], scripts=tmp_path / "scripts", device="cpu", repeat=1, warmup=0)
    # held here: its text (the run's path) is not UTF-8, which pytest-xdist's workers cannot send to the controller
    assert any("was recorded on" in str(w.message) for w in caught), "the device's mismatch is still said"
    tree = ast.parse((tmp_path / "scripts" / "gelu.py").read_bytes())
    docstring = ast.get_docstring(tree)
    assert HOSTILE in docstring and str(run_dir) in docstring
    assert isinstance(tree.body[1], ast.Import), "the docstring is followed by the script's imports, nothing else"


def test_a_call_name_holding_a_newline_is_a_literal_not_sql(layouts_run):
    """call_times.sql names its call in a comment and in the query: a name with a newline once ended that comment,
    and what followed ran as SQL (a parser error, or a statement of the name's own)."""
    with load_run(layouts_run[1]) as run:
        for name in ("gelu\nfoo", "gelu\nSELECT 42 AS injected; --"):
            frame = call_times(run, name)
            assert frame.empty and list(frame.columns) == list(call_times(run, "gelu").columns)


def test_an_archive_in_a_folder_whose_name_holds_a_newline_is_read(layouts_run, tmp_path):
    """archive_view.sql names its list of files in a comment: a folder name with a newline once ended that comment,
    and every query of the archive failed as 'is damaged: Parser Error'."""
    from kernelscope.analyzer import Archive, archive_runs

    to = tmp_path / "runs\nSELECT 1; --"
    archive_runs([layouts_run[1]], to)
    with Archive(to) as archive:
        assert archive.sql("SELECT count(*) AS n FROM kernels")["n"][0] > 0


CONTROLS = "r\x1b]0;owned\x07un\nfaked: line\u202e"  # sets a terminal's title, forges a line, reverses the rest


@pytest.mark.parametrize(
    "command",
    [["archive", "{run}", "--to", "archive"], ["report", "{run}", "-o", "{run}.html"]],
    ids=["archive", "report"],
)
def test_a_folder_name_holding_controls_prints_escaped_in_the_command_s_lines(command, tmp_path, monkeypatch):
    """The lines that name the run or output a command wrote (archive's `ID  RUN: archived`, `report: PATH`, `next:
    kernelscope runs ARCHIVE`) printed the name as it is: a BEL, an escape that sets the terminal's title, a line of
    its own."""
    from click.testing import CliRunner
    from conftest import REPO
    from kernelscope.cli import main

    monkeypatch.chdir(tmp_path)
    shutil.copytree(REPO / "sample_traces" / "mlp", CONTROLS)
    if command[0] == "archive":
        command[-1] = CONTROLS + "-archive"
    result = CliRunner().invoke(main, [word.format(run=CONTROLS) for word in command])
    assert result.exit_code == 0, result.output
    assert not {"\x1b", "\x07", "\u202e"} & set(result.output), result.output
    assert not any(line.startswith("faked") for line in result.output.splitlines()), result.output


def test_a_name_holding_controls_is_suggested_as_a_word_bash_reads_back():
    """The `next:` lines quote a path for the shell: escaped to be printable, it must still be the same path when the
    line is pasted into bash."""
    import subprocess

    from kernelscope.printable import shell_word

    for name in (CONTROLS, "plain name's", "back\\slash\t'quote'\x7f\x9b"):
        word = shell_word(name)
        assert word.isprintable()
        assert subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True).stdout == name
