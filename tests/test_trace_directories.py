"""A directory of plain traces (one per rank) that also holds JSON files of other kinds: the profiler's Execution
Trace, a memory timeline, a tool's summary are left out with one notice; a directory of none but those is refused."""

import gzip
import json
import warnings

import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.analyzer import load_run
from kernelscope.analyzer.archive import Archive
from kernelscope.analyzer.errors import BadInputError
from kernelscope.analyzer.trace_kind import SNIFF_BYTES
from kernelscope.cli import main

MLP_TRACE = REPO / "sample_traces" / "mlp" / "trace.json.gz"
# ExecutionTraceObserver's header as torch 2.13 writes it, then its nodes
EXECUTION_TRACE = {"schema": "1.1.1-chakra.0.0.4", "pid": 1538, "time": "2026-12-02 15:15:21", "start_ts": 2089653}
NODE = {"id": 2, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 1, "inputs": {"values": []}}


def _plain_trace(path, rank):
    doc = json.loads(gzip.decompress(MLP_TRACE.read_bytes()))
    doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def _others(directory, large: bool = False):
    """The profiler's other JSON files beside the traces; ``large``: an Execution Trace too long to be read whole to
    tell what it is (its header says)."""
    nodes = [NODE] * (2 * SNIFF_BYTES // len(json.dumps(NODE)) if large else 3)
    (directory / "rank-0.et.json").write_text(json.dumps(EXECUTION_TRACE | {"nodes": nodes, "finish_ts": 2089999}))
    (directory / "memory.json").write_text(json.dumps([[1.5, 2.5], [[0, 64], [64, 0]]]))
    (directory / "summary.json.gz").write_bytes(gzip.compress(b'{"kernels": 61, "ranks": [0, 1]}'))
    return "memory.json (an array of arrays, not of events), rank-0.et.json (a PyTorch Execution Trace), " + (
        "summary.json.gz (a JSON object without traceEvents)"
    )


@pytest.mark.parametrize("large", [False, True], ids=["small", "execution trace past the sniff"])
def test_the_traces_of_a_directory_load_and_its_other_json_files_are_left_out_with_a_notice(tmp_path, large):
    job = tmp_path / "traces"
    job.mkdir()
    _plain_trace(job / "rank-0.pt.trace.json.gz", 0)
    _plain_trace(job / "rank-1.pt.trace.json.gz", 1)
    listed = _others(job, large)
    with pytest.warns(RuntimeWarning) as caught, load_run(job) as run, load_run(MLP_TRACE) as alone:
        assert run.ranks == [0, 1]
        single = alone.profiling_df().drop(columns="rank")
        assert run.profiling_df(1).drop(columns="rank").reset_index(drop=True).equals(single)
    assert [str(w.message) for w in caught] == [
        f"{job}: leaves out the JSON files that are not Kineto traces: {listed}"
    ], "one notice, naming every file left out"


def test_a_directory_of_json_files_none_of_them_a_trace_is_refused_naming_it(tmp_path):
    listed = _others(tmp_path)
    refusal = f"{tmp_path}: holds no Kineto trace, only JSON of other kinds: {listed}"
    with pytest.raises(BadInputError) as raised:
        load_run(tmp_path)
    assert str(raised.value) == refusal
    result = CliRunner().invoke(main, ["analyze", str(tmp_path)])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"kernelscope: error: {refusal}\n")


def test_the_command_line_says_which_files_it_left_out_in_one_warning_line(tmp_path):
    _plain_trace(tmp_path / "rank-0.pt.trace.json.gz", 0)
    listed = _others(tmp_path)
    notice = f"kernelscope: warning: {tmp_path}: leaves out the JSON files that are not Kineto traces: {listed}\n"
    result = CliRunner().invoke(main, ["analyze", str(tmp_path)])
    assert result.exit_code == 0 and result.stderr.endswith(notice) and result.stderr.count("warning") == 1
    result = CliRunner().invoke(main, ["archive", str(tmp_path), "--to", str(tmp_path / "archive")])
    assert result.exit_code == 0 and result.stderr == notice, "archived with the same notice, once"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an archived run is read back without its trace directory: no notice
        with Archive(tmp_path / "archive") as archive:
            (run_id,) = archive.runs()["run_id"]
            assert len(archive.run(run_id).profiling_df()) == 6


def test_a_trace_that_is_not_json_is_still_refused_naming_it(tmp_path):
    """Only JSON whose first bytes say it is of another kind is left out: a trace cut short or corrupt is the
    loader's, which names it."""
    _plain_trace(tmp_path / "rank-0.pt.trace.json.gz", 0)
    (tmp_path / "rank-1.pt.trace.json").write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", ')
    with pytest.raises(BadInputError, match="rank-1.pt.trace.json: the JSON ends before the trace object is complete"):
        load_run(tmp_path)
