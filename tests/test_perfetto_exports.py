"""Traces that Perfetto read and exported back to JSON (export_json.cc): a slice of 0 ns on a thread comes out as an
instant, "ph": "I" with scope "t" and no dur, and every event's args nested under one "args" key. The 2021 ResNet-50
trace (integer µs, 259 kernels and 1820 runtime calls of 0 µs) as Perfetto writes it reads as the trace itself, by
either reader."""

import gzip
import json

import pytest
from conftest import REPO
from kernelscope.analyzer import load_run
from kernelscope.analyzer.errors import BadInputError
from reference import assert_matches_reference
from test_native_reader import _events_both_ways

EXTERNAL = REPO / "sample_traces" / "external"
LEGACY = EXTERNAL / "kineto_resnet50_autograd_api_2021-02.pt.trace.json.gz"
EVENT_SYNC = EXTERNAL / "hta_event_sync_multi_stream.json.gz"  # 12 runtime calls of 0 µs


def _as_perfetto_exports_it(source, path, phase="I", nested=True):
    """The trace at ``source`` as Perfetto's JSON export writes it: each complete event of 0 µs an instant on its
    thread (``phase``), each event's args under "args" (where ``nested``: the native reader leaves such args to
    DuckDB's)."""
    doc = json.loads(gzip.decompress(source.read_bytes()))
    instants = 0
    for event in doc["traceEvents"]:
        if event.get("ph") == "X" and event.get("dur") == 0:
            event.update(ph=phase, s="t")
            del event["dur"]
            instants += 1
        if "args" in event and nested:
            event["args"] = {"args": event["args"]}
    path.write_text(json.dumps(doc))
    return instants


def test_kernels_and_launches_of_no_duration_exported_by_perfetto_are_rows_as_before(tmp_path):
    """Before, the first kernel of 0 µs was refused as a device event whose ph is "I"."""
    path = tmp_path / "perfetto.json"
    assert _as_perfetto_exports_it(LEGACY, path) == 259 + 1820
    with load_run(LEGACY) as original, load_run(path) as run:
        frame = run.profiling_df()
        assert len(frame) == 10133 and (frame["kernel_us"] == 0).sum() == 259
        assert frame.equals(original.profiling_df())
        assert run.launch_check() == original.launch_check()
        assert run.launch_check().device_events_without_launch == 0


@pytest.mark.parametrize("phase", ["I", "i"])
def test_both_readers_read_an_instant_of_a_launch_as_a_complete_event_of_no_duration(tmp_path, monkeypatch, phase):
    path = tmp_path / "perfetto.json"
    assert _as_perfetto_exports_it(EVENT_SYNC, path, phase, nested=False) == 12
    native, plain, header = _events_both_ways(path, monkeypatch)
    assert header.native_parts == [0] and native == plain
    zero = [row for row in native if row[2] == "cuda_runtime" and row[7] == 0]
    assert len(zero) == 12 and {row[1] for row in zero} == {"X"}
    with load_run(path) as run:
        assert_matches_reference(run, path)
        assert len(run.profiling_df()) == 6


def test_an_instant_of_another_category_stays_an_instant(tmp_path):
    """Kineto's own instants (memory events, "Iteration Start") are no spans; a kernel written as a global instant
    ("s": "g") still is one of no duration, as no scope but the thread's places a kernel."""
    path = tmp_path / "instants.json"
    _as_perfetto_exports_it(EVENT_SYNC, path)
    doc = json.loads(path.read_text())
    doc["traceEvents"].append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1,
                               "tid": 1, "ts": 1, "args": {"Bytes": 512}})  # fmt: skip
    path.write_text(json.dumps(doc))
    with load_run(path) as run:
        phases = run.con.execute("SELECT ph, dur_ns FROM events WHERE name = '[memory]'").fetchall()
        assert phases == [("i", None)]


def test_a_device_event_of_another_phase_is_still_refused(tmp_path):
    path = tmp_path / "begin.json"
    _as_perfetto_exports_it(EVENT_SYNC, path)
    doc = json.loads(path.read_text())
    kernel = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel")
    doc["traceEvents"][kernel]["ph"] = "n"  # an async instant: no thread, no place on a stream
    path.write_text(json.dumps(doc))
    with pytest.raises(BadInputError, match=rf"traceEvents\[{kernel}\] .*whose ph is \"n\", not \"X\""):
        load_run(path)
