"""The SQL attribution against the independent stack-walk reference, on every trace we have."""

import json
import tempfile
from pathlib import Path

import pytest
from conftest import SAMPLE_RUNS, SHARED_TRACES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
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
    trace is the inner one. ``far_apart``: two operators on another thread 2e18 ns apart, each holding a launch (a
    span that holds none is dropped before the join), so that start, duration and event id no longer fit the
    attribution's 128-bit key and it compares structs instead."""

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
            span("cudaLaunchKernel", "cuda_runtime", -999999999999999, 1, tid=2, correlation=8),
            span("aten::late", "cpu_op", 999999999999999, 999999999999999, tid=2),
            span("cudaLaunchKernel", "cuda_runtime", 999999999999999, 1, tid=2, correlation=9),
        ]
        events += [
            {**span(f"kernel_{c}", "kernel", ts, 1, correlation=c, device=0, stream=7), "pid": 0, "tid": 7}
            for c, ts in ((8, 60), (9, 70))
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


SPAN_KINDS = [("cpu_op", "aten::op{}"), ("user_annotation", "ks.module:m{}"), ("user_annotation", "ks.fn:f{}#{}")]


@st.composite
def spans_around_launch_points(draw):
    """Launch points and overlapping spans on a grid of one to 2^16 ns, on one or two threads: spans start and end
    on points, straddle and fill the attribution's time buckets (powers of two of ns), or hold no point."""
    unit = draw(st.sampled_from([1, 3, 1000, 1 << 16]))
    threads = draw(st.sampled_from([[1], [1, 2]]))

    def us(ticks):
        return round(ticks * unit / 1000, 3)

    events = []
    for i, tick in enumerate(sorted(set(draw(st.lists(st.integers(0, 300), min_size=1, max_size=10))))):
        tid = draw(st.sampled_from(threads))
        args = {"correlation": 100 + i, "External id": draw(st.integers(0, 12))}
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": tid,
                "ts": us(tick),
                "dur": 0,
                "args": args,
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"k{i}",
                "pid": 0,
                "tid": 7,
                "ts": 10 + i,
                "dur": 1,
                "args": {"correlation": 100 + i, "device": 0, "stream": 7}
                | draw(st.sampled_from([{}, {"External id": args["External id"]}])),
            }
        )
    for i in range(draw(st.integers(0, 40))):
        cat, name = draw(st.sampled_from(SPAN_KINDS))
        start, length = draw(st.integers(0, 300)), draw(st.integers(1, 80))
        events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name.format(i, i),
                "pid": 1,
                "tid": draw(st.sampled_from(threads)),
                "ts": us(start),
                "dur": round(us(start + length) - us(start), 3),
                "args": {"External id": i % 13},
            }
        )
    return draw(st.permutations(events))


@settings(deadline=None, derandomize=True, database=None, max_examples=80, suppress_health_check=[HealthCheck.too_slow])
@given(events=spans_around_launch_points())
def test_random_spans_around_launch_points_match_the_reference(events):
    """Spans that tie in start or end, nest or overlap, hold no point, or start and end on bucket edges: the
    containment join, the spans it is given and the call's operator against the reference."""
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "trace.json"
        path.write_text(json.dumps({"traceEvents": events}))
        with load_run(path) as run:
            assert_matches_reference(run, path)


@pytest.mark.parametrize("op_end, op_first, inside", [(80, False, True), (80, True, False), (90, False, False)])
def test_an_operator_that_starts_with_the_call_is_its_operator_only_when_nested_in_it(
    tmp_path, op_end, op_first, inside
):
    """Regression (found by the random spans above): the call's operator was any operator starting no earlier
    than the call, though one that starts with it and outlasts it, or comes first in the trace, holds the call."""

    def span(name, cat, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}

    call, op = span("ks.fn:linear#0", "user_annotation", 10, 70), span("aten::linear", "cpu_op", 10, op_end - 10)
    events = [op, call] if op_first else [call, op]
    events += [
        span("cudaLaunchKernel", "cuda_runtime", 30, 5, correlation=7),
        {**span("kernel_k", "kernel", 50, 3, correlation=7, device=0, stream=7), "pid": 0, "tid": 7},
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with load_run(path) as run:
        assert_matches_reference(run, path)
        row = run.profiling_df().iloc[0]
    assert (row.function_name, row.call_op) == ("linear", "aten::linear" if inside else None)
