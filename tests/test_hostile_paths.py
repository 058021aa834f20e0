"""Hostile paths given where a run or trace is read: kernelscope's own outputs (a DuckDB database, a Parquet file)
given back as a trace, and links that loop, each one line naming the file and what it is."""

from __future__ import annotations

import os

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
