"""Hostile paths given where a run or trace is read: kernelscope's own outputs (a DuckDB database, a Parquet file)
given back as a trace, and links that loop, each one line naming the file and what it is."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.analyzer import Archive, BadInputError, load_run
from kernelscope.cli import main

RUN = REPO / "sample_traces" / "mlp"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize(
    ("option", "name", "what"),
    [
        (["sql", "-o"], "run.duckdb", "it is a DuckDB database (as kernelscope sql -o writes), not JSON"),
        (["analyze", "-o"], "kernels.parquet", "it is a Parquet file (as -o and an archive write), not JSON"),
    ],
    ids=["duckdb", "parquet"],
)
def test_an_output_of_kernelscope_given_back_as_a_trace_is_named(option, name, what, tmp_path):
    """`analyze run.duckdb` (what `sql -o` wrote): the file is named as what it is, under any file name, not as JSON
    whose first byte (a checksum's) is not UTF-8."""
    command, flag = option[0], option[1:]
    made = invoke(command, RUN, *flag, tmp_path / name)
    assert made.exit_code == 0, made.output
    renamed = tmp_path / "trace.json"
    os.link(tmp_path / name, renamed)
    for path in (tmp_path / name, renamed):
        with pytest.raises(BadInputError) as raised:
            load_run(path)
        assert str(raised.value) == f"{path}: is not valid JSON ({what})"


def test_a_link_that_loops_is_named_as_one(tmp_path):
    """A run, trace or archive path that is a link looping on itself is not 'no such file': it cannot be read."""
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    problem = f"{loop}: cannot be read (Too many levels of symbolic links)"
    with pytest.raises(BadInputError) as raised:
        load_run(loop)
    assert str(raised.value) == problem
    with pytest.raises(BadInputError) as raised:
        Archive(loop)
    assert str(raised.value) == problem
    for args in (["analyze", loop], ["archive", loop, "--to", tmp_path / "a"], ["runs", loop]):
        result = invoke(*args)
        assert result.exit_code == 2 and result.stderr == f"kernelscope: error: {problem}\n", (args, result.output)
    assert not (tmp_path / "a").exists()


def _without_privileges() -> list[str] | None:
    """The prefix that runs a command where file permissions hold: none for a user, setpriv dropping root's
    capabilities (CAP_DAC_OVERRIDE) for root; None where root cannot drop them."""
    if os.geteuid() != 0:
        return []
    prefix = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]
    try:
        held = subprocess.run([*prefix, "test", "-w", "/proc/1/environ"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return prefix if held.returncode == 1 else None


@pytest.fixture
def read_only(tmp_path):
    """``ro/``, a folder no file may be made in, holding ``ro/run`` whose trace nobody may read."""
    prefix = _without_privileges()
    if prefix is None:
        pytest.skip("root that cannot drop its capabilities reads and writes past file permissions")
    folder = tmp_path / "ro"
    shutil.copytree(RUN, folder / "run")
    (folder / "run" / "trace.json.gz").chmod(0)
    folder.chmod(0o555)
    yield prefix, folder
    folder.chmod(0o755)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["analyze", "ro/run"], "ro/run/trace.json.gz"),
        (["tree", "ro/run"], "ro/run/trace.json.gz"),
        (["analyze", RUN, "-o", "ro/out.csv"], "ro/out.csv"),
        (["sql", RUN, "-o", "ro/out.duckdb"], "ro/out.duckdb"),
        (["report", RUN, "-o", "ro/r.html"], "ro/r.html"),
        (["diff", RUN, RUN, "-o", "ro/d.csv"], "ro/d.csv"),
        (["archive", RUN, "--to", "ro/A"], "ro/A"),
    ],
    ids=lambda value: value[0] if isinstance(value, list) else None,
)
def test_a_file_that_cannot_be_read_or_written_is_one_line_naming_it(args, named, read_only, tmp_path):
    """A trace nobody may read, an output in a folder that takes no new file: one line naming the path as given,
    exit 2, nothing made."""
    prefix, folder = read_only
    before = sorted(folder.rglob("*"))
    command = [*prefix, str(REPO / ".venv" / "bin" / "kernelscope"), *map(str, args)]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr == f"kernelscope: error: {named}: Permission denied\n", done.stderr
    assert sorted(folder.rglob("*")) == before
