"""summary.sql (describe_results, Run.describe, the `summary` view) against the independent summary of
tests/reference.py, computed in plain Python from the reference rows and samples.json."""

import math

import pandas as pd
import pytest
from conftest import SAMPLE_RUNS, SHARED_TRACES
from kernelscope.analyzer import describe_results, load_run
from reference import reference_attribution, reference_sample_totals, reference_summary, trace_calls


def assert_summary_equal(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    assert list(actual["function_name"]) == list(expected["function_name"]), "the calls, most expensive first"
    assert list(actual["num_modules"]) == list(expected["num_modules"])
    for column in ("calls", "num_distinct_samples", "time_spent_us", "time_spent_pct", "tensor_size_MB"):
        for name, got, want in zip(expected["function_name"], actual[column], expected[column], strict=True):
            assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, rel=1e-9, abs=1e-9), (
                f"{name}: {column} {got} != {want}"
            )


def check_against_reference(run, trace, samples: dict, prefixes=("ks.module:", "ks.fn:")) -> None:
    calls = trace_calls(trace)
    rows = reference_attribution(trace, *prefixes, **calls)
    expected = reference_summary(rows, samples, calls)
    assert len(expected) > 0
    for top_k in (len(expected) + 5, 3):
        assert_summary_equal(run.describe(top_k=top_k), expected.head(top_k))
    assert_summary_equal(run.sql("SELECT * FROM summary"), expected)
    assert_summary_equal(describe_results(run.profiling_df(), run.function_data(), top_k=10**6), expected)


@pytest.mark.parametrize("run_dir", SAMPLE_RUNS, ids=lambda p: p.name)
def test_recorded_runs_summarize_as_the_reference(run_dir):
    with load_run(run_dir) as run:
        check_against_reference(run, run_dir / "trace.json.gz", reference_sample_totals(run_dir / "samples.json"))


@pytest.mark.parametrize("trace", SHARED_TRACES, ids=lambda p: p.name)
def test_plain_traces_summarize_their_operator_calls_as_the_reference(trace):
    with load_run(trace, module_prefix="probe:", function_prefix="nofn:") as run:
        check_against_reference(run, trace, {}, ("probe:", "nofn:"))
        summary = run.describe(top_k=100)
    counted = summary[summary["function_name"] != "torch.compile"]  # a compiled function's regions are not counted
    assert counted["calls"].notna().all(), "a call named after an operator or a graph launch has a count"
    assert summary["num_distinct_samples"].isna().all() and summary["tensor_size_MB"].isna().all()


def test_a_cpu_recording_summarizes_as_the_reference(demo_run):
    *_, out = demo_run
    with load_run(out) as run:
        check_against_reference(run, out / "trace.json.gz", reference_sample_totals(out / "samples.json"))


def _frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["module_name", "function_name", "kernel_us"])


def test_equal_times_are_listed_by_name_also_where_top_k_cuts():
    frame = _frame([("m", "relu", 2.0), ("m", "gelu", 2.0), ("m", "add", 1.0), ("m", "silu", 2.0), ("m", None, 9.0)])
    summary = describe_results(frame, {}, top_k=2)
    assert list(summary["function_name"]) == ["gelu", "relu"]
    assert list(describe_results(frame, {}, top_k=10)["function_name"]) == ["gelu", "relu", "silu", "add"]
    assert summary["time_spent_pct"].tolist() == pytest.approx([100 * 2 / 7, 100 * 2 / 7]), "the share of all calls"


def test_a_summary_of_no_time_gives_zero_percent_not_nan():
    frame = _frame([("m", "relu", 0.0), ("m", "gelu", 0.0), ("", "aten::lstm", 0.0)])
    summary = describe_results(frame.assign(call_event_id=[None, None, 7]), {}, top_k=10)
    assert summary["time_spent_pct"].tolist() == [0.0, 0.0, 0.0]
    assert list(summary["function_name"]) == ["aten::lstm", "gelu", "relu"]
    assert summary.set_index("function_name").loc["aten::lstm", "calls"] == 1, "its operator event"


def test_a_call_named_after_an_operator_counts_its_operator_events_per_rank():
    frame = pd.DataFrame(
        {
            "module_name": ["rnn"] * 5 + [""],
            "function_name": ["aten::lstm"] * 4 + ["(other operator)", "linear"],
            "kernel_us": [1.0] * 6,
            "call_event_id": [10, 10, 11, 10, 12, 3],
            "rank": [0, 0, 0, 1, 0, 0],
        }
    )
    summary = describe_results(frame, {}, top_k=10).set_index("function_name")
    assert summary.loc["aten::lstm", "calls"] == 3, "events 10 and 11 of rank 0, event 10 of rank 1"
    assert summary.loc["(other operator)", "calls"] == 1
    assert math.isnan(summary.loc["linear", "calls"]), "a scoped call whose samples were not collected"
