"""A pid or tid written as the text of an integer ("1441273664") is that integer's process or thread, as Chrome's
trace viewer (which keys threads by JavaScript property, where "7" and 7 are one key) and Perfetto (CoerceToUint32
of a JSON string) read it: torch 1.8's exporter writes its CPU threads as strings and its flow starts as numbers."""

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
from kernelscope.analyzer import ingest, load_run
from reference import assert_matches_reference

REPO = Path(__file__).resolve().parent.parent
LEGACY = REPO / "sample_traces" / "external" / "kineto_resnet50_autograd_api_2021-02.pt.trace.json.gz"
BERT = REPO / "sample_traces" / "external" / "tl_h100_bert_small.json.gz"


def _doc(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _ops_by_correlation(run) -> dict:
    query = "SELECT e.correlation, k.op FROM kernels k JOIN events e ON e.event_id = k.event_id"
    return dict(run.con.execute(query).fetchall())


def test_a_kernel_of_the_2021_format_whose_launch_was_lost_is_attributed_where_its_flow_starts(tmp_path):
    """The 2021 format writes an operator's and a launch's tid as a string ("1441273664") and the flow start of the
    launch ("ph": "s") as a number (1441273664): one thread. A kernel whose launch the profiler lost, and which has no
    External id either, is placed by its flow alone: at the operator of that thread holding the flow's start."""
    doc = _doc(LEGACY)
    events = doc["traceEvents"]
    lost = sorted(e["args"]["correlation"] for e in events if e.get("name") == "cudaLaunchKernel")[:40]
    for e in events:
        if e.get("cat") == "Kernel" and e["args"].get("correlation") in lost:
            del e["args"]["external id"]
    doc["traceEvents"] = [e for e in events if not (e.get("cat") == "Runtime" and e["args"].get("correlation") in lost)]
    path = tmp_path / "launches_lost.json"
    path.write_text(json.dumps(doc))
    with load_run(LEGACY) as run:
        expected = _ops_by_correlation(run)
    with load_run(path) as run:
        assert_matches_reference(run, path)
        got = _ops_by_correlation(run)
    assert {c: got[c] for c in lost} == {c: expected[c] for c in lost}
    assert all(got[c] is not None for c in lost)


@pytest.mark.parametrize("native", [True, False], ids=["native", "duckdb"])
@pytest.mark.parametrize("every", [1, 2])
def test_a_thread_written_as_a_number_and_as_its_text_is_one_thread(tmp_path, monkeypatch, every, native):
    """Every pid and tid of a real trace written as text (every=1), or every other one (a merge of writers that
    differ): the same rows, threads and all, as the trace written with numbers, read by either reader. Text that
    is no integer's own ("07", "+7", "-0", " 7") stays a name."""
    doc = _doc(BERT)
    for i, e in enumerate(doc["traceEvents"]):
        for key in ("pid", "tid"):
            if i % every == 0 and type(e.get(key)) is int:
                e[key] = str(e[key])
    at = max(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X")  # the trace's start stays where it was
    odd = [{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": text, "ts": at, "dur": 1, "args": {}}
           for text in ("07", "+7", "-0", " 7", "7.0", "99999999999999999999")]  # fmt: skip
    doc["traceEvents"] += odd
    path = tmp_path / "text_threads.json"
    path.write_text(json.dumps(doc))
    with load_run(BERT) as run:
        expected = run.profiling_df().drop(columns=["event_id", "call_event_id"])
    if not native:
        monkeypatch.setattr(ingest, "native_reader", None)
    with load_run(path) as run:
        assert_matches_reference(run, path)
        got = run.profiling_df().drop(columns=["event_id", "call_event_id"])
        named = "SELECT tid_name FROM events WHERE name = 'x' AND tid < -4611686018427387904"  # keys of names
        names = run.con.execute(named).fetchall()
    pd.testing.assert_frame_equal(got, expected)
    assert sorted(name for (name,) in names) == sorted(e["tid"] for e in odd)
