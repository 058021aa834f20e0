"""The SQL attribution against the independent stack-walk reference, on every trace we have."""

import json

import pytest
from conftest import SAMPLE_RUNS, SHARED_TRACES
from kernelscope.analyzer import load_run
from reference import assert_matches_reference


@pytest.mark.parametrize("trace", SHARED_TRACES, ids=lambda p: p.name)
def test_plain_kineto_traces_match_reference(trace):
    # The probes' record_function scopes stand in for modules, so containment is exercised.
    with load_run(trace, module_prefix="probe:", function_prefix="nofn:") as run:
        assert_matches_reference(run, trace, "probe:", "nofn:")


@pytest.mark.parametrize("run_dir", SAMPLE_RUNS, ids=lambda p: p.name)
def test_recorded_gpu_runs_match_reference(run_dir):
    with load_run(run_dir) as run:
        assert run.device == "cuda"
        assert_matches_reference(run, run_dir / "trace.json.gz", "ks.module:", "ks.fn:")


def test_cpu_recording_matches_reference(demo_run):
    *_, out = demo_run
    with load_run(out) as run:
        assert run.device == "cpu"
        assert_matches_reference(run, out / "trace.json.gz", "ks.module:", "ks.fn:")


def test_cuda_graph_replay_belongs_to_the_scope_around_its_launch():
    trace = next(p for p in SHARED_TRACES if p.name == "cuda_graph.json.gz")
    with load_run(trace, module_prefix="probe:", function_prefix="nofn:") as run:
        frame = run.profiling_df()
    counts = frame["module_name"].value_counts(dropna=False).to_dict()
    # one eager pass, one bare replay, one replay inside probe:graph_scope: six kernels each
    assert counts == {"eager": 6, "graph_scope": 6, None: 6}
    replayed = frame[frame["module_name"] == "graph_scope"]
    assert replayed["correlation"].nunique() == 1, "a replay's kernels share the cudaGraphLaunch correlation"


def test_kernels_of_an_unfollowed_thread_are_rows():
    trace = next(p for p in SHARED_TRACES if p.name == "threads.json.gz")
    with load_run(trace) as run:
        frame = run.profiling_df()
    assert len(frame) == 40
    assert frame["thread"].nunique() == 2
    orphan = frame[frame["op"].isna()]
    assert len(orphan) == 20 and orphan["thread"].nunique() == 1


def test_compiled_triton_kernels_keep_their_op():
    trace = next(p for p in SHARED_TRACES if p.name == "compile.json.gz")
    with load_run(trace, module_prefix="probe:", function_prefix="nofn:") as run:
        frame = run.profiling_df()
    triton = frame[frame["kernel"].str.startswith("triton_")]
    assert len(triton) > 0 and (triton["op"] == triton["kernel"]).all()
    assert set(frame["call_op"]) == {"Torch-Compiled Region: 0/0"}


def test_memcpy_and_memset_are_rows_with_their_kind():
    trace = next(p for p in SHARED_TRACES if p.name == "misc.json.gz")
    with load_run(trace, module_prefix="probe:", function_prefix="nofn:") as run:
        frame = run.profiling_df()
    assert frame["kind"].value_counts().to_dict() == {"kernel": 9, "memcpy": 4}
    linear = frame[frame["op"] == "aten::addmm"]
    assert list(linear["module_name"]) == ["inner"] and list(linear["call_op"]) == ["aten::linear"]
    assert list(frame[frame["op"] == "aten::mm"]["module_name"]) == ["outer"]


def _twin_spans_trace(path, far_apart: bool):
    """One launch inside twin call scopes and twin operators (identical start and end): the one later in the
    trace is the inner one. ``far_apart``: two events on another thread 2e18 ns apart, so that start, duration
    and event id no longer fit the attribution's 128-bit key and it compares structs instead."""

    def span(name, cat, ts, dur, tid=1, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}

    events = [
        span("ks.module:block", "user_annotation", 0, 100),
        span("ks.fn:linear#0", "user_annotation", 10, 80),
        span("ks.fn:relu#1", "user_annotation", 10, 80),
        span("aten::outer", "cpu_op", 20, 60),
        span("aten::twin_a", "cpu_op", 25, 40),
        span("aten::twin_b", "cpu_op", 25, 40),
        span("cudaLaunchKernel", "cuda_runtime", 30, 5, correlation=7),
        {**span("kernel_k", "kernel", 50, 3, correlation=7, device=0, stream=7), "pid": 0, "tid": 7},
    ]
    if far_apart:
        events += [
            span("aten::early", "cpu_op", -999999999999999, 1, tid=2),
            span("aten::late", "cpu_op", 999999999999999, 999999999999999, tid=2),
        ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize("far_apart", [False, True], ids=["integer key", "struct key"])
def test_identical_spans_are_told_apart_by_their_order_in_the_trace(tmp_path, far_apart):
    path = _twin_spans_trace(tmp_path / "trace.json", far_apart)
    with load_run(path) as run:
        assert run.con.execute("SELECT getvariable('ks_packed')").fetchone()[0] is (not far_apart)
        assert_matches_reference(run, path, "ks.module:", "ks.fn:")
        row = run.profiling_df().iloc[0]
        assert (row.module_name, row.function_name, row.sample_id, row.op, row.call_op) == (
            "block",
            "relu",
            1,
            "aten::twin_b",
            "aten::outer",
        )
