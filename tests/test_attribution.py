"""The SQL attribution against the independent stack-walk reference, on every trace we have."""

import json
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from conftest import SAMPLE_RUNS, SHARED_TRACES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernelscope.analyzer import held, load_run
from reference import assert_matches_reference


@pytest.fixture(params=["native sweep", "range join"])
def way(request, monkeypatch):
    """Which way held.py finds the spans that hold each launch: _held.c's sweep, or held_by_sql.sql's range join
    (where the extension is not built), whose keys and time buckets the tests that take this fixture also check."""
    if request.param == "range join":
        monkeypatch.setattr(held, "native_sweep", None)
    elif held.native_sweep is None:
        pytest.skip("the native sweep is not built")
    return request.param


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


def _span(name, cat, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _kernel(correlation, ts):
    return {**_span(f"kernel_{correlation}", "kernel", ts, 1, correlation=correlation, device=0, stream=7), "pid": 0}


# Spans on another thread 2e18 ns apart, each holding a launch (or, in a CPU trace, an operator itself): with event
# ids of 5 bits, start, duration and event id no longer fit the attribution's 128-bit key, so it compares structs.
FAR_APART = [
    _span("aten::early", "cpu_op", -999999999999999, 1, tid=2),
    _span("cudaLaunchKernel", "cuda_runtime", -999999999999999, 1, tid=2, correlation=8),
    _span("aten::late", "cpu_op", 999999999999999, 999999999999999, tid=2),
    _span("cudaLaunchKernel", "cuda_runtime", 999999999999999, 1, tid=2, correlation=9),
    _kernel(8, 60),
    _kernel(9, 70),
]


def _twin_spans_trace(path, far_apart: bool):
    """One launch inside twin call scopes and twin operators (identical start and end): the one later in the
    trace is the inner one. ``far_apart``: two operators on another thread 2e18 ns apart, each holding a launch (a
    span that holds none is dropped before the join), so that start, duration and event id no longer fit the
    attribution's 128-bit key and it compares structs instead."""
    events = [
        _span("ks.module:block", "user_annotation", 0, 100),
        _span("ks.fn:linear#0", "user_annotation", 10, 80),
        _span("ks.fn:relu#1", "user_annotation", 10, 80),
        _span("aten::outer", "cpu_op", 20, 60),
        _span("aten::twin_a", "cpu_op", 25, 40),
        _span("aten::twin_b", "cpu_op", 25, 40),
        _span("cudaLaunchKernel", "cuda_runtime", 30, 5, correlation=7),
        _kernel(7, 50),
    ]
    if far_apart:
        events += FAR_APART
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize("far_apart", [False, True], ids=["integer key", "struct key"])
def test_identical_spans_are_told_apart_by_their_order_in_the_trace(tmp_path, far_apart, way):
    path = _twin_spans_trace(tmp_path / "trace.json", far_apart)
    with load_run(path) as run:
        if way == "range join":
            assert run.con.execute("SELECT getvariable('ks_key_bits').packed").fetchone()[0] is (not far_apart)
        assert_matches_reference(run, path, "ks.module:", "ks.fn:")
        row = run.profiling_df().iloc[0]
        assert (row.module_name, row.function_name, row.sample_id, row.op, row.call_op) == (
            "block",
            "relu",
            1,
            "aten::twin_b",
            "aten::outer",
        )


SPAN_KINDS = [
    ("cpu_op", "aten::op{}"),
    ("cpu_op", "op{}"),
    ("user_annotation", "ks.module:m{}"),
    ("user_annotation", "ks.fn:f{}#{}"),
]


@st.composite
def spans_around_launch_points(draw):
    """Launch points and overlapping spans on a grid of one to 2^16 ns, on one or two threads: spans start and end
    on points, straddle and fill the attribution's time buckets (powers of two of ns), or hold no point; a third of
    the launches lost, their kernels held as the operator their External id names (if they carry one)."""
    unit = draw(st.sampled_from([1, 3, 1000, 1 << 16]))
    threads = draw(st.sampled_from([[1], [1, 2]]))

    def us(ticks):
        return round(ticks * unit / 1000, 3)

    events = []
    for i, tick in enumerate(sorted(set(draw(st.lists(st.integers(0, 300), min_size=1, max_size=10))))):
        tid = draw(st.sampled_from(threads))
        args = {"correlation": 100 + i, "External id": draw(st.integers(0, 12))}
        lost = draw(st.sampled_from([False, False, True]))  # the profiler lost the launch: the kernel is left
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
        if lost:
            events.pop()
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


def test_a_kernel_whose_launch_is_lost_is_named_by_its_operator_when_another_launch_of_it_was_kept(tmp_path):
    """A plain trace where the profiler kept one of an operator's two launches: the kernel left without its launch
    is held as the operator its External id names, and its call is named after that operator (it has a namespace;
    the operator around it has none) as the kept launch's is."""
    external = {"External id": 5}
    events = [
        _span("outer_plain", "cpu_op", 0, 100, **{"External id": 4}),
        _span("aten::inner", "cpu_op", 5, 90, **external),
        _span("cudaLaunchKernel", "cuda_runtime", 10, 1, correlation=1, **external),
        {**_kernel(1, 50), "args": {"correlation": 1, "device": 0, "stream": 7, **external}},
        {**_kernel(2, 60), "args": {"correlation": 2, "device": 0, "stream": 7, **external}},  # its launch lost
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with load_run(path) as run:
        assert_matches_reference(run, path)
        rows = run.profiling_df().set_index("correlation")[["function_name", "op", "call_op"]]
    assert rows.to_dict("index") == {
        c: {"function_name": "aten::inner", "op": "aten::inner", "call_op": "outer_plain"} for c in (1, 2)
    }


def _load(tmp_path, events, far_apart: bool, way: str, device: bool = True):
    extra = FAR_APART if device else [e for e in FAR_APART if e["cat"] == "cpu_op"]
    path = tmp_path / "trace.json"
    metadata = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": n, "args": {"name": "t"}} for n in range(16)]  # ids
    path.write_text(json.dumps({"traceEvents": (metadata + events + extra) if far_apart else events}))
    run = load_run(path)
    if way == "range join":
        assert run.con.execute("SELECT getvariable('ks_key_bits').packed").fetchone()[0] is (not far_apart)
    assert_matches_reference(run, path)
    return run


@pytest.mark.parametrize("far_apart", [False, True], ids=["integer key", "struct key"])
def test_spans_that_start_together_nest_by_their_end(tmp_path, far_apart, way):
    """Module scopes, call scopes and operators that start at the same time: the shorter is the inner one, on both
    key paths (the struct key orders by -end)."""
    events = [
        _span("ks.module:outer", "user_annotation", 0, 100),
        _span("ks.module:inner", "user_annotation", 0, 60),
        _span("ks.fn:linear#0", "user_annotation", 10, 45),
        _span("ks.fn:relu#1", "user_annotation", 10, 40),
        _span("aten::wide", "cpu_op", 20, 25),
        _span("aten::narrow", "cpu_op", 20, 15),
        _span("cudaLaunchKernel", "cuda_runtime", 30, 1, correlation=7),
        _kernel(7, 50),
    ]
    with _load(tmp_path, events, far_apart, way) as run:
        row = run.profiling_df().set_index("correlation").loc[7]
    assert (row.module_name, row.function_name, row.sample_id, row.op, row.call_op) == (
        "inner",
        "relu",
        1,
        "aten::narrow",
        "aten::wide",
    )


@pytest.mark.parametrize("far_apart", [False, True], ids=["integer key", "struct key"])
def test_a_cpu_operator_s_parent_is_the_longer_of_two_that_start_together(tmp_path, far_apart, way):
    events = [
        _span("ks.module:block", "user_annotation", 0, 100),
        _span("aten::wide", "cpu_op", 20, 25),
        _span("aten::narrow", "cpu_op", 20, 15),
        _span("aten::leaf", "cpu_op", 20, 5),
    ]
    with _load(tmp_path, events, far_apart, way, device=False) as run:
        rows = run.profiling_df().set_index("op")
    assert rows.loc[["aten::wide", "aten::narrow", "aten::leaf"], "kernel_us"].tolist() == [10.0, 10.0, 5.0]
    assert set(rows.loc[["aten::wide", "aten::narrow", "aten::leaf"], "function_name"]) == {"aten::wide"}


def test_operators_that_abut_are_siblings_not_parent_and_child(tmp_path):
    """A CPU operator that starts where another ends is not inside it, nor is a 0 ns one at its end (it is inside
    the one that starts there); one with the same span as another, later in the trace, is inside it."""
    events = [
        _span("aten::parent", "cpu_op", 0, 20),
        _span("aten::first", "cpu_op", 0, 10),
        _span("aten::second", "cpu_op", 10, 10),
        _span("aten::instant", "cpu_op", 10, 0),  # at first's end, inside parent
        _span("aten::at_end", "cpu_op", 20, 0),  # at parent's end: outside it, inside next
        _span("aten::next", "cpu_op", 20, 10),
        _span("aten::whole", "cpu_op", 20, 10),  # the same span as next, later in the trace: inside it
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with load_run(path) as run:
        assert_matches_reference(run, path)
        rows = run.profiling_df().set_index("op")
    self_us = rows["kernel_us"].to_dict()
    assert self_us == {
        "aten::parent": 0.0,
        "aten::first": 10.0,
        "aten::second": 10.0,
        "aten::instant": 0.0,
        "aten::at_end": 0.0,
        "aten::next": 0.0,
        "aten::whole": 10.0,
    }
    assert rows["function_name"].to_dict() == {
        "aten::parent": "aten::parent",
        "aten::first": "aten::parent",
        "aten::second": "aten::parent",
        "aten::instant": "aten::parent",
        "aten::at_end": "aten::next",
        "aten::next": "aten::next",
        "aten::whole": "aten::next",
    }
    assert rows["kernel_us"].sum() == 30.0, "the outermost operators' time"


@pytest.mark.parametrize("spread", [False, True], ids=["only launch", "bucket edges"])
def test_a_1_ns_operator_holds_the_launch_at_its_start_at_a_bucket_edge(tmp_path, spread, way):
    """The spans inside one time bucket (ks_enclosers) are kept only where a launch point of their thread falls in
    that bucket: a 1 ns operator holding the only launch, or one on each side of a bucket boundary (with launches
    far apart, buckets of 2^20 ns), each holds the launch at its start and not the one at its end."""
    edge = 3 << 20  # ns: a bucket boundary
    starts = [edge - 1, edge] if spread else [edge]
    events = []
    for n, start in enumerate(starts):
        events += [
            _span(f"aten::op{n}", "cpu_op", start / 1000, 0.001),
            _span("cudaLaunchKernel", "cuda_runtime", start / 1000, 0, correlation=n),
            _kernel(n, 10 + n),
        ]
    if spread:  # two more launches, 10 and 20 ms in: a mean gap of 2^22 ns between points, buckets of 2^20 ns
        events += [_span("cudaLaunchKernel", "cuda_runtime", 10000 * k, 0, correlation=100 + k) for k in (1, 2)]
        events += [_kernel(100 + k, 20 + k) for k in (1, 2)]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with load_run(path) as run:
        shift = run.con.execute("SELECT getvariable('ks_bucket_shift')").fetchone()[0]
        assert_matches_reference(run, path)
        ops = run.profiling_df().set_index("correlation")["op"].to_dict()
    assert shift == ((20 if spread else 0) if way == "range join" else None)
    assert [ops[n] for n in range(len(starts))] == [f"aten::op{n}" for n in range(len(starts))]


def test_start_us_counts_from_the_trace_s_first_complete_event(tmp_path):
    events = [
        {"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 1, "tid": 1, "ts": 1, "s": "t"},
        _span("aten::mm", "cpu_op", 500, 100),
        _span("cudaLaunchKernel", "cuda_runtime", 510, 5, correlation=1),
        _kernel(1, 2000),
        _span("aten::first", "cpu_op", 250, 10, tid=2),
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with load_run(path) as run:
        assert run.profiling_df()["start_us"].tolist() == [1750.0]
    cpu = [e for e in events if e["cat"] == "cpu_op"]
    path.write_text(json.dumps({"traceEvents": cpu}))
    with load_run(path) as run:
        assert run.profiling_df()["start_us"].tolist() == [0.0, 250.0]


CPU_SPAN_KINDS = [
    ("cpu_op", "aten::op{}"),
    ("cpu_op", "triton_op{}"),
    ("cpu_op", "ks.fn:g{}#{}"),
    ("user_annotation", "ks.module:m{}"),
    ("user_annotation", "ks.fn:f{}#{}@m{}"),
    ("user_annotation", "annotation{}"),
]


@st.composite
def cpu_spans(draw):
    """A CPU trace (no device events): operators, scopes and annotations on one or two threads that nest, tie,
    abut, last 0 ns, repeat another's span, or overlap without nesting."""
    unit = draw(st.sampled_from([1, 1000]))
    threads = draw(st.sampled_from([[1], [1, 2]]))
    spans = []
    for i in range(draw(st.integers(1, 30))):
        cat, name = draw(st.sampled_from(CPU_SPAN_KINDS))
        start, length = draw(st.integers(0, 60)), draw(st.integers(0, 40))
        spans.append((cat, name.format(i, i, i), draw(st.sampled_from(threads)), start, length))
    spans += [(cat, f"{name}_twin", *rest) for cat, name, *rest in draw(st.lists(st.sampled_from(spans), max_size=3))]
    spans.append(("cpu_op", "aten::always", 1, draw(st.integers(0, 60)), draw(st.integers(0, 5))))
    events = [
        {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": 1,
            "tid": tid,
            "ts": round(start * unit / 1000, 3),
            "dur": round(length * unit / 1000, 3),
            "args": {},
        }
        for cat, name, tid, start, length in spans
    ]
    return draw(st.permutations(events))


@settings(deadline=None, derandomize=True, database=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(events=cpu_spans())
def test_random_cpu_operators_match_the_reference(events):
    """Each CPU row's self time, scopes, call and call operator against the reference's stack walk."""
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "trace.json"
        path.write_text(json.dumps({"traceEvents": events}))
        with load_run(path) as run:
            assert run.device == "cpu"
            assert_matches_reference(run, path)


@pytest.mark.parametrize("far_apart", [False, True], ids=["integer key", "struct key"])
def test_a_kernel_in_no_call_is_named_after_the_outermost_operator_in_its_module(tmp_path, far_apart, way):
    """Kernels that no call scope holds: named after the outermost operator that holds the launch inside the
    innermost module scope (not one that holds the module scope), by its own name where it has "::", else
    "(other operator)"; none where no operator lies in the module."""
    events = [
        _span("aten::around", "cpu_op", 0, 300),  # holds the module scopes: never a call's name
        _span("ks.module:block", "user_annotation", 10, 280),
        _span("aten::lstm", "cpu_op", 20, 80),
        _span("aten::_cudnn_rnn", "cpu_op", 30, 60),
        _span("cudaLaunchKernel", "cuda_runtime", 40, 1, correlation=1),
        _span("triton_poi_fused_add_0", "cpu_op", 120, 20),
        _span("cudaLaunchKernel", "cuda_runtime", 130, 1, correlation=2),
        _span("ks.module:block.empty", "user_annotation", 200, 20),
        _span("cudaLaunchKernel", "cuda_runtime", 210, 1, correlation=3),
        _span("cudaLaunchKernel", "cuda_runtime", 400, 1, correlation=4),  # outside every span
    ] + [_kernel(c, 500 + c) for c in (1, 2, 3, 4)]
    with _load(tmp_path, events, far_apart, way) as run:
        rows = run.profiling_df().set_index("correlation")
        ids = dict(run.sql("SELECT name, event_id FROM events WHERE cat = 'cpu_op'").itertuples(index=False))
        summary = run.describe().set_index("function_name")
    got = {c: (rows.loc[c, "function_name"], rows.loc[c, "call_op"], rows.loc[c, "call_event_id"]) for c in range(1, 5)}
    assert got == {
        1: ("aten::lstm", "aten::around", ids["aten::lstm"]),
        2: ("(other operator)", "aten::around", ids["triton_poi_fused_add_0"]),
        3: (None, "aten::around", pd.NA),
        4: (None, None, pd.NA),
    }
    assert summary.loc["aten::lstm", "calls"] == summary.loc["(other operator)", "calls"] == 1


@pytest.mark.parametrize("far_apart", [False, True], ids=["integer key", "struct key"])
def test_a_launch_filed_under_another_thread_is_its_operator_s(tmp_path, far_apart, way):
    """CUPTI can file the runtime calls of a thread started after another ended under the ended thread's id (seen on
    the H200: a Python thread started in each forward), while its operators and scopes carry its own: the launch
    is its operator's (its External id) where that operator was running at the launch, on the same process."""
    events = [
        _span("ks.module:encoder", "user_annotation", 0, 100, tid=3),
        _span("ks.fn:Tensor.mul_#0", "user_annotation", 10, 20, tid=3),
        _span("aten::mul_", "cpu_op", 12, 15, tid=3, **{"External id": 41}),
        _span("cudaLaunchKernel", "cuda_runtime", 14, 5, tid=2, correlation=5, **{"External id": 41}),
        _kernel(5, 30),
        # an operator of the same External id that was not running at the launch keeps the launch where it was filed
        _span("ks.fn:Tensor.add_#0", "user_annotation", 40, 20, tid=2),
        _span("aten::add_", "cpu_op", 50, 2, tid=3, **{"External id": 42}),
        _span("cudaLaunchKernel", "cuda_runtime", 45, 5, tid=2, correlation=6, **{"External id": 42}),
        _kernel(6, 60),
    ]
    frame = _load(tmp_path, events, far_apart, way).profiling_df().set_index("correlation")
    assert frame.loc[5, ["module_name", "function_name", "op", "thread"]].tolist() == [
        "encoder",
        "Tensor.mul_",
        "aten::mul_",
        3,
    ]
    assert frame.loc[6, ["function_name", "thread"]].tolist() == ["Tensor.add_", 2]


@pytest.mark.parametrize("far_apart", [False, True], ids=["integer key", "struct key"])
def test_a_kernel_whose_launch_was_lost_is_held_as_its_operator(tmp_path, far_apart, way):
    """A device event whose correlation has no launch in the trace (the profiler lost the runtime call, or the trace
    was cut) belongs to the operator its External id names, on that operator's thread, and to the scopes that hold
    that operator (not to one inside it, which may not have held the launch); the launch check still counts it."""
    events = [
        _span("ks.module:block", "user_annotation", 0, 100, tid=3),
        _span("ks.fn:linear#0", "user_annotation", 10, 80, tid=3),
        _span("aten::linear", "cpu_op", 20, 60, tid=3, **{"External id": 1}),
        _span("aten::addmm", "cpu_op", 25, 40, tid=3, **{"External id": 2}),
        _span("ks.fn:relu#0", "user_annotation", 26, 30, tid=3),  # inside the operator: not the lost launch's call
        _span("cudaLaunchKernel", "cuda_runtime", 30, 5, tid=3, correlation=7, **{"External id": 2}),
        {**_kernel(7, 200), "args": {"correlation": 7, "External id": 2, "device": 0, "stream": 7}},
        {**_kernel(11, 210), "args": {"correlation": 11, "External id": 2, "device": 0, "stream": 7}},  # lost
        _span("ks.module:block.head", "user_annotation", 120, 20, tid=3),
        _span("aten::mul", "cpu_op", 125, 5, tid=3, **{"External id": 3}),
        {**_kernel(12, 220), "args": {"correlation": 12, "External id": 3, "device": 0, "stream": 7}},  # lost
        _kernel(13, 230),  # lost, and no External id: nothing to attribute it by
    ]
    with _load(tmp_path, events, far_apart, way) as run:
        rows = run.profiling_df().set_index("correlation")
        check = run.launch_check()
        ids = dict(run.sql("SELECT name, event_id FROM events WHERE cat = 'cpu_op'").itertuples(index=False))
    columns = ["module_name", "function_name", "op", "call_op", "thread", "call_event_id"]
    got = {c: rows.loc[c, columns].tolist() for c in (7, 11, 12)}
    assert got[7][:5] == ["block", "relu", "aten::addmm", None, 3]
    assert got[11][:5] == ["block", "linear", "aten::addmm", "aten::linear", 3]
    assert got[12] == ["block.head", "aten::mul", "aten::mul", "aten::mul", 3, ids["aten::mul"]]
    assert rows.loc[13, columns].isna().all()
    assert (check.device_events, check.device_events_without_launch) == (6 if far_apart else 4, 3)
