"""CPU recordings: a row is a CPU operator by its self time, which torch.profiler's key_averages() computes from
the same events. Both are read here from one profiler session: the demo recorded by profile(), and a plain
torch.profiler pass; per operator they agree to float rounding (TOLERANCE), per call the recording's ranking is the
one its operators' self CPU time gives."""

import pytest

torch = pytest.importorskip("torch")
import kernelscope.recorder.profiler as recorder_profiler  # noqa: E402
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.demo import demo_workload  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from reference import assert_matches_reference  # noqa: E402
from torch import nn  # noqa: E402
from torch._C._profiler import _ExperimentalConfig  # noqa: E402

# Both sides add the same integer-nanosecond durations; torch holds them as float µs: sums of a few hundred
# events differ by float rounding only.
TOLERANCE = {"rel": 1e-9, "abs": 1e-6}
SCOPES = ("ks.module:", "ks.fn:")


def _scope(name: str) -> bool:
    return name.startswith(SCOPES)


def _self_time_by_operator(events) -> dict:
    return {e.key: e.self_cpu_time_total for e in events.key_averages() if not _scope(e.key)}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo recorded on the CPU by profile(), and torch.profiler's events of that same session (torch builds
    them where the recorder's trace_only is off)."""
    sessions = []

    class Kept(torch.profiler.profile):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            sessions.append(self)

    model, samples = demo_workload("cpu", torch.float32)
    out = tmp_path_factory.mktemp("cpu_rows") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(recorder_profiler, "profile", Kept)
        patch.setattr(recorder_profiler, "experimental_config", lambda: _ExperimentalConfig(profile_all_threads=True))
        profiler = ModuleFunctionKernelProfiler()
        frame, data = profiler.profile(model, samples, warmup_iterations=1, out=out)
        summary = profiler.describe_results(frame, data, top_k=1000)
    return frame, summary, sessions[-1].events(), out


def test_each_operator_s_time_is_its_self_cpu_time(demo):
    frame, _, events, out = demo
    with load_run(out) as run:
        assert_matches_reference(run, out / "trace.json.gz")
    ops = [e for e in events if not _scope(e.name)]
    assert not any(_scope(a.name) for e in ops for a in e.cpu_children), "no operator holds a scope here"
    ours = frame.groupby("op")["kernel_us"].sum().to_dict()
    theirs = _self_time_by_operator(events)
    assert ours.keys() == theirs.keys()
    assert ours == pytest.approx(theirs, **TOLERANCE)
    roots = [e for e in ops if not _has_operator_above(e)]
    assert frame["kernel_us"].sum() == pytest.approx(sum(e.cpu_time_total for e in roots), **TOLERANCE)
    assert frame["kernel_us"].sum() == pytest.approx(sum(theirs.values()), **TOLERANCE), "Σ is the operators' time"


def _has_operator_above(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if not _scope(parent.name):
            return True
        parent = parent.cpu_parent
    return False


def _call_of(event) -> str:
    """The call torch's own tree puts an operator in: its innermost ks.fn: scope (the recording names every call)."""
    parent = event.cpu_parent
    while not parent.name.startswith("ks.fn:"):
        parent = parent.cpu_parent
    return parent.name[len("ks.fn:") :].split("@")[0].split("#")[0]


def test_calls_rank_as_their_operators_self_cpu_time(demo):
    _, summary, events, _ = demo
    by_call: dict = {}
    for event in events:
        if not _scope(event.name):
            by_call[_call_of(event)] = by_call.get(_call_of(event), 0.0) + event.self_cpu_time_total
    expected = sorted(by_call.items(), key=lambda item: (-item[1], item[0]))
    assert dict(zip(summary["function_name"], summary["time_spent_us"], strict=True)) == pytest.approx(
        by_call, **TOLERANCE
    )
    assert list(summary["function_name"]) == [name for name, _ in expected]
    addmm = sum(e.self_cpu_time_total for e in events if e.name == "aten::addmm" and _call_of(e) == "linear")
    linear = summary.set_index("function_name").loc["linear", "time_spent_us"]
    assert addmm > 0 and linear >= addmm * (1 - TOLERANCE["rel"]), "linear holds the operators that do its work"


@torch.library.custom_op("kstest::annotated", mutates_args=())
def annotated(x: torch.Tensor) -> torch.Tensor:
    with torch.profiler.record_function("inside the operator"):  # a user_annotation inside an operator
        return torch.ops.aten.mul(torch.ops.aten.add(x, 1), 2)


@annotated.register_fake
def _(x):
    return torch.empty_like(x)


def test_a_plain_trace_s_rows_are_its_operators_by_self_time(tmp_path):
    """A plain torch.profiler pass (no kernelscope scopes) with user annotations around the pass and inside an
    operator: annotations are not operators, their time outside operators is in no row, and an operator's
    children are found through them, where key_averages() counts the annotation as the child."""
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)).eval()
    with torch.no_grad():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            with torch.profiler.record_function("the pass"):
                annotated(model(torch.randn(32, 64)))
    prof.export_chrome_trace(str(tmp_path / "plain.json"))
    with load_run(tmp_path / "plain.json") as run:
        frame = run.profiling_df()
        summary = run.describe(top_k=100).set_index("function_name")
        assert_matches_reference(run, tmp_path / "plain.json")
    events = prof.events()
    ours = frame.groupby("op")["kernel_us"].sum().to_dict()
    theirs = {e.key: e.self_cpu_time_total for e in events.key_averages()}
    inside = next(e for e in events if e.name == "inside the operator")
    assert "the pass" not in ours and "inside the operator" not in ours
    assert ours["kstest::annotated"] == pytest.approx(
        theirs["kstest::annotated"] + inside.self_cpu_time_total, **TOLERANCE
    ), "torch took the annotation's whole time off its operator, kernelscope only its operators'"
    others = {op: us for op, us in ours.items() if op != "kstest::annotated"}
    assert others == pytest.approx({op: theirs[op] for op in others}, **TOLERANCE)
    linear = [e for e in events if e.name == "aten::linear"]
    assert summary.loc["aten::linear", "calls"] == len(linear) == 2, "a call named after each outermost operator"
    assert summary.loc["aten::linear", "time_spent_us"] == pytest.approx(
        sum(e.cpu_time_total for e in linear), **TOLERANCE
    )
