"""A file of a run directory given where the run is expected, a new user's first mistake: the message says which
run directory to give instead, and the run's trace, which loads without the run's samples, says so."""

import shutil

import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.cli import main

MLP = REPO / "sample_traces" / "mlp"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    copy = tmp_path_factory.mktemp("files") / "my run"
    shutil.copytree(MLP, copy)
    return copy


@pytest.mark.parametrize("command", ["analyze", "tree", "sql"])
@pytest.mark.parametrize("name", ["manifest.json", "samples.json"])
def test_a_file_of_the_run_that_is_no_trace_names_the_run_directory(run, command, name):
    result = CliRunner().invoke(main, [command, str(run / name)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        f"kernelscope: error: {run / name}: is JSON but not a Kineto/Chrome trace (no traceEvents array); it is a "
        f"file of the run directory '{run}': give '{run}'"
    )


def test_the_runs_trace_loads_and_a_note_says_what_it_lacks(run):
    result = CliRunner().invoke(main, ["analyze", str(run / "trace.json.gz"), "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == (
        f"kernelscope: note: {run / 'trace.json.gz'} is the trace of the run directory '{run}', read without its "
        f"samples (calls, input signatures): give '{run}' for them"
    )
    whole = CliRunner().invoke(main, ["analyze", str(run), "--format", "csv"])
    assert whole.exit_code == 0 and whole.stderr == "", "the run directory itself: no note"


def test_bench_of_the_runs_trace_names_the_run_directory(run):
    pytest.importorskip("torch")
    result = CliRunner().invoke(main, ["bench", str(run / "trace.json.gz")])
    assert result.exit_code == 2
    assert result.stderr.strip().endswith(
        f"it has no samples to replay; it is a file of the run directory '{run}': give '{run}'"
    )
