"""CUDA graph replays named by their launch (run format 3): the recorder opens no scope around a replay, and the
analyzer names the kernels of a ``cudaGraphLaunch`` ``torch.cuda.CUDAGraph.replay``.

The format-3 run here is made from the real H200 recording ``sample_traces/cuda_graph`` (format 1, with a scope
around the replay) by taking that scope out of its trace, as a format-3 recording leaves it out: the rows must stay
the same, but for the replay's sample id, which only format 1's scope carries."""

import gzip
import json
import shutil
from dataclasses import astuple

import pandas as pd
import pytest
from conftest import REPO, SHARED_TRACES
from kernelscope.analyzer import describe_results, diff, load_run
from kernelscope.analyzer.rundir import GRAPH_REPLAY_CALL
from reference import assert_matches_reference, reference_launch_check

SCOPED = REPO / "sample_traces" / "cuda_graph"


def _without_replay_scope(target):
    """A copy of the format-1 cuda_graph run as format 3 writes it: no replay scope, no replay samples."""
    shutil.copytree(SCOPED, target)
    doc = json.loads(gzip.decompress((target / "trace.json.gz").read_bytes()))
    scope = f"ks.fn:{GRAPH_REPLAY_CALL}"
    kept = [e for e in doc["traceEvents"] if not e.get("name", "").startswith(scope)]
    assert len(doc["traceEvents"]) - len(kept) == 1, "the format-1 run has one replay scope"
    doc["traceEvents"] = kept
    (target / "trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    samples = json.loads((target / "samples.json").read_text())
    del samples["functions"][GRAPH_REPLAY_CALL]
    (target / "samples.json").write_text(json.dumps(samples))
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["format_version"] = 3
    manifest["annotation"].update(module_separator="@", graph_replay_call=GRAPH_REPLAY_CALL)
    (target / "manifest.json").write_text(json.dumps(manifest))
    return target


@pytest.fixture(scope="module")
def unscoped(tmp_path_factory):
    return _without_replay_scope(tmp_path_factory.mktemp("graph") / "run")


def test_replay_named_by_its_launch_gives_the_scoped_rows(unscoped):
    with load_run(SCOPED) as run:
        scoped = run.profiling_df()
    with load_run(unscoped) as run:
        named = run.profiling_df()
        assert_matches_reference(run, unscoped / "trace.json.gz")
    replay = named["function_name"] == GRAPH_REPLAY_CALL
    assert replay.sum() == 3 and named.loc[replay, "sample_id"].isna().all(), "three kernels, no sample"
    assert (scoped.loc[replay, "sample_id"] == 0).all()
    ids = ("sample_id", "event_id", "call_event_id")
    columns = [c for c in scoped.columns if c not in ids]  # one event fewer before them
    pd.testing.assert_frame_equal(named[columns], scoped[columns])
    pd.testing.assert_series_equal(named.loc[~replay, "sample_id"], scoped.loc[~replay, "sample_id"])
    with load_run(unscoped) as run:
        (launch,) = run.sql("SELECT event_id FROM events WHERE name = 'cudaGraphLaunch'")["event_id"]
    assert (named.loc[replay, "call_event_id"] == launch).all(), "the replay's call is its launch"


def test_a_graph_launch_inside_another_call_belongs_to_that_call(tmp_path):
    """A call scope that holds the launch made it (a library op that launches a graph, a compiled region's replay):
    here the launch is moved inside Tensor.clone's scope."""
    target = _without_replay_scope(tmp_path / "run")
    doc = json.loads(gzip.decompress((target / "trace.json.gz").read_bytes()))
    events = doc["traceEvents"]
    launch = next(e for e in events if e.get("name") == "cudaGraphLaunch")
    clone = next(e for e in events if e.get("name", "").startswith("ks.fn:Tensor.clone"))
    launch["ts"] = clone["ts"] + clone["dur"] / 2
    launch["dur"] = 0
    (target / "trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    with load_run(target) as run:
        frame = run.profiling_df()
        summary = run.describe().set_index("function_name")
        assert_matches_reference(run, target / "trace.json.gz")
    graph = frame[frame["correlation"] == launch["args"]["correlation"]]
    assert len(graph) == 3 and set(graph["function_name"]) == {"Tensor.clone"} and (graph["sample_id"] == 0).all()
    assert GRAPH_REPLAY_CALL not in set(frame["function_name"]) and GRAPH_REPLAY_CALL not in summary.index


def test_diff_counts_a_named_replay_by_its_launches(unscoped):
    frame = diff(SCOPED, unscoped)
    replay = frame[(frame["level"] == "function") & (frame["name"] == GRAPH_REPLAY_CALL)].iloc[0]
    assert (replay["calls_a"], replay["calls_b"]) == (1, 1)
    assert replay["time_a_us"] == replay["time_b_us"] > 0


def test_summary_counts_a_named_replay_by_its_launches_without_samples(unscoped):
    with load_run(SCOPED) as run:
        scoped = run.describe()
        scoped = scoped.set_index(scoped.pop("function_name").astype(object))
    with load_run(unscoped) as run:
        assert GRAPH_REPLAY_CALL not in run.function_data()
        summaries = [run.describe(), run.describe(rank=0), describe_results(run.profiling_df(), run.function_data())]
        summaries.append(run.sql("SELECT * FROM summary"))
    for summary in summaries:
        summary = summary.set_index(summary.pop("function_name").astype(object))
        assert summary.loc[GRAPH_REPLAY_CALL, "calls"] == 1, "one cudaGraphLaunch ran its three kernels"
        assert pd.isna(summary.loc[GRAPH_REPLAY_CALL, "num_distinct_samples"])
        assert pd.isna(summary.loc[GRAPH_REPLAY_CALL, "tensor_size_MB"])
        pd.testing.assert_frame_equal(summary.drop(index=GRAPH_REPLAY_CALL), scoped.drop(index=GRAPH_REPLAY_CALL))


def test_bare_traces_name_graph_launches_and_older_runs_do_not(tmp_path):
    trace = next(p for p in SHARED_TRACES if p.name == "cuda_graph.json.gz")
    with load_run(trace, module_prefix="probe:", function_prefix="nofn:") as run:
        frame = run.profiling_df()
    launched = frame.groupby("correlation")["kernel"].transform("size") > 1
    assert launched.sum() == 12 and (frame.loc[launched, "function_name"] == GRAPH_REPLAY_CALL).all()
    assert frame.loc[~launched, "function_name"].str.startswith("aten::").all(), "the eager pass: its operators"
    older = _without_replay_scope(tmp_path / "run")
    manifest = json.loads((older / "manifest.json").read_text())
    del manifest["annotation"]["graph_replay_call"]  # a recording that does not name calls from the trace
    (older / "manifest.json").write_text(json.dumps(manifest))
    with load_run(older) as run:
        frame = run.profiling_df()
    assert frame["function_name"].isna().sum() == 3, "the replay's kernels are in no call"


def test_a_recording_opens_no_scope_around_graph_replays_and_says_so(tmp_path):
    torch = pytest.importorskip("torch")
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    replay = torch.cuda.CUDAGraph.replay
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    seen = []
    model.register_forward_pre_hook(lambda *_: seen.append(torch.cuda.CUDAGraph.replay))
    for calls in ("all", "functional"):
        profiler = ModuleFunctionKernelProfiler(calls=calls)
        seen.clear()
        profiler.profile(model, [((torch.randn(2, 4),), {})], warmup_iterations=1, out=tmp_path / calls)
        assert seen and all(r is replay for r in seen), "CUDAGraph.replay is never patched"
        annotation = profiler.run.manifest["annotation"]
        assert annotation.get("graph_replay_call") == (GRAPH_REPLAY_CALL if calls == "all" else None)
        assert profiler.run.graph_replay_call == annotation.get("graph_replay_call")
        assert profiler.run.manifest["format_version"] == 3
        profiler.release()


def test_an_archived_format_3_run_keeps_its_replay_calls(tmp_path):
    from kernelscope.analyzer.archive import Archive, archive_runs

    run_dir = REPO / "sample_traces" / "cuda_graph_format3"
    [(run_id, added)] = archive_runs([run_dir], tmp_path / "archive")
    with Archive(tmp_path / "archive").run(run_id) as back, load_run(run_dir) as original:
        assert added and back.graph_replay_call == original.graph_replay_call == GRAPH_REPLAY_CALL
        pd.testing.assert_frame_equal(back.describe(top_k=1000), original.describe(top_k=1000))
        replay = diff(original, back).query("level == 'function' and name == @GRAPH_REPLAY_CALL").iloc[0]
    assert (replay["calls_a"], replay["calls_b"]) == (1, 1)


def test_the_launch_check_counts_a_graph_launch_without_kernels(tmp_path):
    """A graph launch is a launch that must have device events (attribution.sql): with its three kernels lost, the
    check reports it."""
    target = shutil.copytree(REPO / "sample_traces" / "cuda_graph_format3", tmp_path / "run")
    with load_run(target) as run:
        assert run.launch_check().launches == 2, "the linear's cudaLaunchKernel and the cudaGraphLaunch"
    doc = json.loads(gzip.decompress((target / "trace.json.gz").read_bytes()))
    correlation = next(e for e in doc["traceEvents"] if e.get("name") == "cudaGraphLaunch")["args"]["correlation"]
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if not (e.get("cat") == "kernel" and e["args"]["correlation"] == correlation)
    ]
    (target / "trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    with load_run(target) as run:
        check = run.launch_check()
    assert (check.launches, check.launches_without_device_event, check.device_events) == (2, 1, 3)


def test_the_launches_a_graph_capture_records_in_the_pass_are_no_losses():
    """sample_traces/static_cache_generate (H200): generate() with a static cache calls its reduce-overhead compiled
    decoding step, whose cudagraph trees record a graph in the recorded pass (a new StaticCache per call: new static
    addresses). The 40 kernel launches between its cudaStreamBeginCapture and cudaStreamEndCapture are recorded into
    the graph and run as its replays: they have no device events of their own, and the profiler lost nothing."""
    run_dir = REPO / "sample_traces" / "static_cache_generate"
    with load_run(run_dir) as run:
        check = run.launch_check()
    assert check.ok and (check.launches, check.device_events) == (504 - 40, 732)
    assert astuple(check) == reference_launch_check(run_dir / "trace.json.gz")


def _capture_call(name, tid, ts, correlation):
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 469, "tid": tid, "ts": ts, "dur": 1.0,
            "args": {"correlation": correlation}}  # fmt: skip


# the linear's cuLaunchKernelEx runs at 5172028934012.156 on thread 469; its kernel is taken out
LAUNCH_TS = 5172028934012.156


@pytest.mark.parametrize(
    "captures, lost",
    [
        ([], 1),
        ([("cudaStreamBeginCapture", 469, LAUNCH_TS - 5), ("cudaStreamEndCapture", 469, LAUNCH_TS + 500)], 0),
        ([("cuStreamBeginCapture_v2", 469, LAUNCH_TS - 5)], 0),  # never ended: captures to the trace's end
        ([("cudaStreamBeginCapture", 470, LAUNCH_TS - 5), ("cudaStreamEndCapture", 470, LAUNCH_TS + 500)], 1),
        ([("cudaStreamBeginCapture", 469, LAUNCH_TS - 9), ("cudaStreamEndCapture", 469, LAUNCH_TS - 5)], 1),
        ([("cudaStreamBeginCapture", 469, LAUNCH_TS + 5), ("cudaStreamEndCapture", 469, LAUNCH_TS + 9)], 1),
        # two streams captured from one thread: the launch after the first end is still captured
        ([("cudaStreamBeginCapture", 469, LAUNCH_TS - 9), ("hipStreamBeginCapture", 469, LAUNCH_TS - 7),
          ("cudaStreamEndCapture", 469, LAUNCH_TS - 5), ("cudaStreamEndCapture", 469, LAUNCH_TS + 500)], 0),
        ([("cudaStreamBeginCapture", 469, LAUNCH_TS - 9), ("cudaStreamEndCapture", 469, LAUNCH_TS - 7),
          ("cudaStreamEndCapture", 469, LAUNCH_TS - 5)], 1),  # an end more than the begins opens nothing
    ],
)  # fmt: skip
def test_a_launch_without_kernel_is_lost_unless_its_thread_was_capturing(tmp_path, captures, lost):
    """A kernel launch its thread made while capturing a stream (after a begin that left a capture open, before its
    next capture call) needs no device event; any other still does, whatever other threads capture."""
    target = shutil.copytree(REPO / "sample_traces" / "cuda_graph_format3", tmp_path / "run")
    doc = json.loads(gzip.decompress((target / "trace.json.gz").read_bytes()))
    launch = next(e for e in doc["traceEvents"] if e.get("name") == "cuLaunchKernelEx")
    assert launch["ts"] == LAUNCH_TS
    kernel = launch["args"]["correlation"]
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if not (e.get("cat") == "kernel" and e["args"]["correlation"] == kernel)
    ] + [_capture_call(name, tid, ts, 900_000 + i) for i, (name, tid, ts) in enumerate(captures)]
    (target / "trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    with load_run(target) as run:
        check = run.launch_check()
    assert (check.launches, check.launches_without_device_event) == (2 - (1 - lost), lost)
    assert astuple(check) == reference_launch_check(target / "trace.json.gz")
