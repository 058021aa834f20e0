"""Async slices ("ph": "b"/"e", the Chrome format's spans on a track of their id rather than on a thread's stack) of
the categories the attribution reads as scopes on a thread (cpu_op, user_annotation) hold no thread's launches, so
they are not read; the run says so in a note instead of attributing as if they were not there without a word."""

import gzip
import json

import pytest
from conftest import REPO
from kernelscope.analyzer import load_run
from test_trace_text import reader  # noqa: F401 - the fixture of both readers

MLP = REPO / "sample_traces" / "mlp" / "trace.json.gz"
COLUMNS = ["module_name", "function_name", "op", "call_op", "kernel", "kernel_us"]


@pytest.mark.usefixtures("reader")
def test_an_annotation_written_as_an_async_slice_is_not_a_scope_and_gets_a_note(tmp_path):
    doc = json.loads(gzip.decompress(MLP.read_bytes()))
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(doc))
    launch = next(e for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime")
    around = {"cat": "user_annotation", "name": "step", "pid": launch["pid"], "tid": launch["tid"], "id": 1}
    doc["traceEvents"] += [
        {**around, "ph": "b", "ts": launch["ts"] - 1},
        {**around, "ph": "e", "ts": launch["ts"] + launch["dur"] + 1},
    ]
    path = tmp_path / "async.json"
    path.write_text(json.dumps(doc))
    with load_run(plain) as run:
        rows, plain_notes = run.profiling_df()[COLUMNS], run.notes()
    with load_run(path) as run:
        assert run.profiling_df()[COLUMNS].equals(rows)
        notes = run.notes()
    assert notes == plain_notes + [
        f'{path}: holds 1 user_annotation written as async slices ("ph": "b"), which lie on tracks of their own, '
        "not on a thread's stack: they are read as no scope"
    ]
