"""Property tests, sized for CI, of what benchmarks/fuzz_traces.py checks at length: any mutation of a
real trace or run directory loads (losing no device event) or fails with a KernelscopeError; a shuffled
or reformatted trace, or one with its spans written as "B"/"E" pairs, gives exactly the same attribution;
synthetic events of any shape and type do the same. Deterministic (derandomized); the long run and its
results are in benchmarks/RESULTS.md."""

import gzip
import json
import random
import sys
import tempfile
from functools import cache
from pathlib import Path

import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernelscope.analyzer import KernelscopeError, load_run

sys.path.insert(0, str(REPO / "benchmarks"))
import fuzz_traces  # noqa: E402
import trace_mutations  # noqa: E402

SOURCES = {s.name: s for s in trace_mutations.sources(["mlp", "cuda_graph", "demo", "plain/misc", "plain/threads"])}
CI = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@cache
def baseline(name: str, as_run_dir: bool) -> tuple:
    return fuzz_traces.baseline(SOURCES[name], as_run_dir)


def _outcome(name, kind, seed):
    with tempfile.TemporaryDirectory() as workdir:
        case = trace_mutations.make_case(SOURCES[name], kind, random.Random(seed), Path(workdir))
        expected = baseline(name, case.path.is_dir()) if case.valid else None
        return case, fuzz_traces.run_case(case, expected)


@settings(CI, max_examples=80)
@given(
    name=st.sampled_from(sorted(SOURCES)),
    kind=st.sampled_from(sorted(trace_mutations.KINDS)),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_mutation_of_a_real_input_loads_or_is_a_documented_error(name, kind, seed):
    case, (outcome, detail) = _outcome(name, kind, seed)
    assert outcome in fuzz_traces.PASSING, f"{case.steps}: {outcome}\n{detail}"
    if case.valid:
        assert outcome == "same"


@settings(CI, max_examples=12)
@given(data=st.data())
def test_shuffled_events_give_the_same_attribution(data):
    source = SOURCES["plain/misc"]
    events = source.doc["traceEvents"]
    order = data.draw(st.permutations(range(len(events))))
    doc = dict(source.doc, traceEvents=[events[i] for i in order])
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "shuffled.json"
        path.write_text(json.dumps(doc))
        with load_run(path, **source.load_kwargs) as run:
            assert fuzz_traces.fingerprint(run) == baseline("plain/misc", False)


def test_keys_after_trace_events_that_hold_arrays_are_read():
    """Regression (found by the fuzzer): deviceProperties written after traceEvents was cut into the array."""
    source = SOURCES["mlp"]
    doc = {k: v for k, v in source.doc.items() if k != "deviceProperties"}
    doc["deviceProperties"] = source.doc["deviceProperties"]
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "late-keys.json"
        path.write_text(json.dumps(doc))
        with load_run(path) as run:
            assert fuzz_traces.fingerprint(run) == baseline("mlp", False)
            assert run.header.keys == {k: v for k, v in source.doc.items() if k != "traceEvents"}, (
                "every header key is read, before the array and after it"
            )


ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "ts"]), st.integers(0, 3), max_size=2),
)
FIELDS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "args.correlation", "args.External id"]


@st.composite
def synthetic_traces(draw):
    """Operator ⊃ launch → device event triples on one thread, then a few fields dropped or given values
    of another type, events shuffled, odd elements mixed in. Returns (events, number of faults)."""
    events = []
    for i in range(draw(st.integers(1, 5))):
        t = 100 * i
        op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t, "dur": 50}
        op["args"] = {"External id": i}
        launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 10}
        launch |= {"dur": 5, "args": {"correlation": 1000 + i, "External id": i}}
        device = {"ph": "X", "cat": draw(st.sampled_from(sorted(trace_mutations.DEVICE_CATS))), "name": f"k{i}"}
        device |= {"pid": 0, "tid": 7, "ts": t + 20, "dur": 30, "args": {"correlation": 1000 + i, "stream": 7}}
        events += [op, launch, device]
    faults = draw(st.integers(0, 3))
    for _ in range(faults):
        event = draw(st.sampled_from(events))
        target, _, key = draw(st.sampled_from(FIELDS)).rpartition(".")
        holder = event.get("args") if target else event
        if not isinstance(holder, dict):
            continue
        if draw(st.booleans()):
            holder.pop(key or target, None)
        else:
            holder[key or target] = draw(ODD)
    events = draw(st.permutations(events)) + draw(st.lists(ODD, max_size=2))
    return events, faults


@settings(CI, max_examples=120)
@given(trace=synthetic_traces(), wrap=st.booleans())
def test_synthetic_traces_load_whole_or_are_a_documented_error(trace, wrap):
    events, faults = trace
    device = sum(
        1 for e in events if isinstance(e, dict) and e.get("ph") == "X" and fuzz_traces.is_device(e.get("cat"))
    )
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "synthetic.json"
        path.write_text(json.dumps({"traceEvents": events} if wrap else events))
        try:
            with load_run(path) as run:
                frame = run.profiling_df()
                run.describe()
                run.launch_check()
        except KernelscopeError as exc:
            odd = any(not isinstance(e, (dict, type(None))) for e in events)  # an element that is not an event
            assert faults or odd, f"a valid trace was refused: {exc}"
            assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc)
            assert device == 0 or "holds no device events" not in str(exc), "device events were dropped"
            return
    assert len(frame) == device or (device == 0 and len(frame) > 0), "one row per device event (or leaf operator)"
    if not faults:
        assert (frame["op"] == "aten::mm").all(), "each device event is attributed to the operator around its launch"


def test_a_shuffled_cpu_recording_gives_the_same_rows(demo_run):
    """CPU recordings (leaf operators as rows) rely on operator order on a thread: shuffling must not matter."""
    *_, out = demo_run
    doc = json.loads(gzip.decompress((out / "trace.json.gz").read_bytes()))
    with load_run(out / "trace.json.gz") as run:
        expected = fuzz_traces.fingerprint(run)
    assert len(expected[0]) > 100
    with tempfile.TemporaryDirectory() as workdir:
        for seed in range(3):
            events = list(doc["traceEvents"])
            random.Random(seed).shuffle(events)
            path = Path(workdir) / f"shuffled-{seed}.json"
            path.write_text(json.dumps(dict(doc, traceEvents=events)))
            with load_run(path) as run:
                assert fuzz_traces.fingerprint(run) == expected


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_spans_rewritten_as_begin_end_pairs_give_the_same_attribution(name):
    case, (outcome, detail) = _outcome(name, "begin_end", 3)
    assert int(case.steps[0].split()[0]) > 0, case.steps
    assert outcome == "same", detail
