"""kernelscope diff and kernelscope.analyzer.diff: per function, module and kernel, and the CI gate."""

import gzip
import json
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.analyzer import diff, load_run
from kernelscope.analyzer.diff import regressions
from kernelscope.cli import main

DEMO = REPO / "sample_traces" / "demo"
COLUMNS = [
    "level",
    "name",
    "time_a_us",
    "time_b_us",
    "delta_us",
    "delta_pct",
    "ratio",
    "share_a_pct",
    "share_b_pct",
    "calls_a",
    "calls_b",
]


@pytest.fixture(scope="module")
def slower(tmp_path_factory):
    """The demo run with every kernel of `linear` taking three times as long."""
    out = tmp_path_factory.mktemp("diff") / "slower"
    shutil.copytree(DEMO, out)
    with load_run(DEMO) as run:
        linear = set(run.sql("SELECT event_id FROM kernels WHERE function_name = 'linear'")["event_id"])
    trace = json.loads(gzip.decompress((out / "trace.json.gz").read_bytes()))
    for event_id, event in enumerate(trace["traceEvents"]):
        if event_id in linear:
            event["dur"] = event["dur"] * 3
    (out / "trace.json.gz").write_bytes(gzip.compress(json.dumps(trace).encode()))
    return out


def test_a_run_against_itself_changes_nothing():
    frame = diff(DEMO, DEMO)
    assert list(frame.columns) == COLUMNS
    assert (frame["delta_us"] == 0).all() and (frame["ratio"] == 1).all()
    assert set(frame["level"]) == {"total", "function", "module", "kernel"}
    assert regressions(frame, 0.0).empty


def test_a_slower_function_shows_at_every_level(slower):
    frame = diff(DEMO, slower)
    with load_run(DEMO) as run:
        linear_us = run.describe(top_k=100).set_index("function_name").loc["linear", "time_spent_us"]
        total_us = run.profiling_df()["kernel_us"].sum()
        calls = run.describe(top_k=100).set_index("function_name").loc["linear", "calls"]
    functions = frame[frame["level"] == "function"].set_index("name", drop=False)
    assert functions.iloc[0]["name"] == "linear", "sorted by absolute delta"
    assert functions.loc["linear", "ratio"] == pytest.approx(3.0)
    assert functions.loc["linear", "delta_us"] == pytest.approx(2 * linear_us)
    assert functions.loc["linear", "calls_a"] == functions.loc["linear", "calls_b"] == calls
    others = functions[functions["name"].ne("linear").fillna(True)]
    assert (others["delta_us"].abs() < 1e-9).all()
    total = frame[frame["level"] == "total"].iloc[0]
    assert total["delta_pct"] == pytest.approx(100 * 2 * linear_us / total_us)
    assert total["share_a_pct"] == pytest.approx(100) and total["share_b_pct"] == pytest.approx(100)
    for level in ("function", "module", "kernel"):
        deltas = frame.loc[frame["level"] == level, "delta_us"].abs().tolist()
        assert deltas == sorted(deltas, reverse=True)
        assert frame.loc[frame["level"] == level, "time_b_us"].sum() == pytest.approx(total["time_b_us"])
    gated = regressions(frame, 50.0)
    assert set(zip(gated["level"], gated["name"], strict=True)) == {("total", None), ("function", "linear")}


def test_something_new_in_b_is_an_infinite_regression():
    frame = diff(REPO / "sample_traces" / "mlp", DEMO)
    conv = frame[(frame["level"] == "function") & (frame["name"] == "conv2d")].iloc[0]
    assert conv["time_a_us"] == 0 and conv["ratio"] == float("inf") and pd.isna(conv["calls_a"])
    assert "conv2d" in set(regressions(frame, 1e9)["name"])


def test_cli_diff_and_its_gate(slower):
    runner = CliRunner()
    csv = runner.invoke(main, ["diff", str(DEMO), str(slower), "--format", "csv", "--level", "function"])
    assert csv.exit_code == 0
    lines = csv.output.strip().splitlines()
    assert lines[0] == ",".join(COLUMNS) and lines[1].startswith("total,") and lines[2].startswith("function,linear,")
    assert {line.split(",")[0] for line in lines[1:]} == {"total", "function"}
    failed = runner.invoke(main, ["diff", str(DEMO), str(slower), "--fail-above", "50", "--top-k", "1"])
    assert failed.exit_code == 1 and "regression above 50%" in failed.output
    assert "function linear +200.0%" in failed.output
    passed = runner.invoke(main, ["diff", str(DEMO), str(slower), "--fail-above", "250"])
    assert passed.exit_code == 0
