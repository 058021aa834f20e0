"""kernelscope diff and kernelscope.analyzer.diff: per function, module and kernel, and the CI gate."""

import gzip
import json
import shutil
import warnings

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
    args = ["diff", str(REPO / "sample_traces" / "mlp"), str(DEMO), "--level", "function", "--json"]
    [row] = [row for row in json.loads(CliRunner().invoke(main, args).output) if row["name"] == "conv2d"]
    assert row["ratio"] is None and row["delta_pct"] is None and row["time_a_us"] == 0  # JSON has no infinity


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


def _with_durations(source, target, scale: dict[str, float]):
    """A copy of run ``source`` whose kernels of each function in ``scale`` last that many times as long."""
    shutil.copytree(source, target)
    with load_run(source) as run:
        owners = dict(run.sql("SELECT event_id, function_name FROM kernels WHERE function_name IS NOT NULL").values)
    trace = json.loads(gzip.decompress((target / "trace.json.gz").read_bytes()))
    for event_id, event in enumerate(trace["traceEvents"]):
        if owners.get(event_id) in scale:
            event["dur"] = event["dur"] * scale[owners[event_id]]
    (target / "trace.json.gz").write_bytes(gzip.compress(json.dumps(trace).encode()))
    return target


def test_a_speed_up_passes_the_gate(slower):
    runner = CliRunner()
    faster = runner.invoke(main, ["diff", str(slower), str(DEMO), "--fail-above", "0"])
    assert faster.exit_code == 0, faster.output
    frame = diff(slower, DEMO)
    linear = frame[(frame["level"] == "function") & (frame["name"] == "linear")].iloc[0]
    assert linear["delta_pct"] == pytest.approx(-200 / 3), "linear got faster by two thirds: gated on growth only"


def test_the_gate_reads_the_rows_that_level_and_top_k_hide(tmp_path):
    """relu, a small function, grows by half: still a regression when the table shows kernels only, or the top
    function only (linear, whose time does not change)."""
    relu_slower = _with_durations(DEMO, tmp_path / "relu", {"relu": 1.5})
    frame = diff(DEMO, relu_slower)
    functions = frame[frame["level"] == "function"]
    assert functions.iloc[0]["name"] == "relu" and functions["delta_us"].abs().iloc[1] == 0
    for shown in (["--level", "kernel"], ["--level", "module", "--top-k", "1"], ["--top-k", "1"]):
        gated = CliRunner().invoke(main, ["diff", str(DEMO), str(relu_slower), "--fail-above", "20", *shown])
        assert gated.exit_code == 1 and "function relu +50.0%" in gated.output, shown
    assert CliRunner().invoke(main, ["diff", str(DEMO), str(relu_slower), "--fail-above", "60"]).exit_code == 0


def test_a_function_of_no_time_in_either_run_is_no_regression(tmp_path):
    """relu's kernels take 0 µs in both runs: its delta_pct is NULL (0 / 0), which is no growth at all."""
    idle = _with_durations(DEMO, tmp_path / "idle", {"relu": 0})
    frame = diff(idle, idle)
    relu = frame[(frame["level"] == "function") & (frame["name"] == "relu")].iloc[0]
    assert relu["time_a_us"] == relu["time_b_us"] == 0 and pd.isna(relu["delta_pct"]) and pd.isna(relu["ratio"])
    assert regressions(frame, 0.0).empty
    assert CliRunner().invoke(main, ["diff", str(idle), str(idle), "--fail-above", "0"]).exit_code == 0


def test_top_k_0_shows_every_row_and_a_file_gets_them_all():
    frame = diff(DEMO, REPO / "sample_traces" / "mlp")
    runner = CliRunner()
    for extra in (["--top-k", "0"], []):
        csv = runner.invoke(main, ["diff", str(DEMO), str(REPO / "sample_traces" / "mlp"), "--format", "csv", *extra])
        assert csv.exit_code == 0 and len(csv.output.strip().splitlines()) == len(frame) + 1, extra
    table = runner.invoke(main, ["diff", str(DEMO), str(REPO / "sample_traces" / "mlp")])
    counts = frame["level"].value_counts()
    assert f"10 of {counts['function']} function, 10 of {counts['module']} module" in table.output


def test_runs_of_other_devices_or_dtypes_are_compared_with_a_warning(demo_run, tmp_path):
    *_, cpu_run = demo_run
    with pytest.warns(UserWarning) as caught:
        diff(DEMO, cpu_run)
    messages = [str(w.message) for w in caught]
    assert any("A ran on cuda, B on cpu" in m for m in messages), messages
    assert any("A's inputs are float16, B's float32" in m for m in messages), messages
    result = CliRunner().invoke(main, ["diff", str(DEMO), str(cpu_run), "--level", "function"])
    assert result.exit_code == 0
    assert "kernelscope: warning: A ran on cuda, B on cpu; their times may not compare" in result.output
    page = CliRunner().invoke(main, ["report", str(DEMO), str(cpu_run), "-o", str(tmp_path / "page.html")])
    assert page.exit_code == 0 and "UserWarning" not in page.stderr, "a line as diff's, not Python's warning"
    assert "kernelscope: warning: A's inputs are float16, B's float32; their times may not compare" in page.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        diff(DEMO, DEMO)  # the same run: nothing to warn about


def test_kernel_rows_of_a_table_have_short_names():
    table = CliRunner().invoke(main, ["diff", str(DEMO), str(DEMO), "--level", "kernel", "--top-k", "0"])
    csv = CliRunner().invoke(main, ["diff", str(DEMO), str(DEMO), "--level", "kernel", "--format", "csv"])
    assert "vectorized_layer_norm_kernel " in table.output and "c10::Half" not in table.output
    assert "c10::Half" in csv.output


def test_diff_reads_runs_with_the_prefix_options_of_analyze():
    from kernelscope.cli import main

    misc = str(REPO / "sample_traces" / "plain_kineto" / "misc.json.gz")
    options = ["--module-prefix", "probe:", "--level", "module", "--format", "csv"]
    probed = CliRunner().invoke(main, ["diff", misc, misc, *options])
    assert probed.exit_code == 0, probed.output
    assert "module,inner," in probed.output, "the probe: scopes are modules, as analyze --module-prefix reads them"
    empty = CliRunner().invoke(main, ["diff", misc, misc, "--module-prefix", ""])
    assert empty.exit_code == 2 and "--module-prefix must not be empty" in empty.output


@pytest.mark.parametrize("command", ["diff", "report"])
def test_an_archive_and_two_ids_without_archive_point_to_it(command, tmp_path):
    """`diff ARCHIVE ID_A ID_B` (--archive left out) said only click's 'Got unexpected extra argument (ID_B)'."""
    from kernelscope.analyzer import archive_runs

    archive_runs([REPO / "sample_traces" / "mlp"], tmp_path / "arch")
    result = CliRunner().invoke(main, [command, str(tmp_path / "arch"), "mlp", "mlp"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].endswith(
        f"{command} takes two runs; two of an archive: kernelscope {command} --archive {tmp_path / 'arch'} ID_A ID_B"
    )


def test_an_archive_given_as_a_run_names_itself_in_the_command_to_type(tmp_path):
    """`diff ARCHIVE RUN` said to type `kernelscope diff --archive ARCHIVE ID_A ID_B`, a placeholder for the path
    the user had just given; the line now holds the archive's own path, ready to copy."""
    from kernelscope.analyzer import archive_runs

    archive_runs([REPO / "sample_traces" / "mlp"], tmp_path / "my archive")
    result = CliRunner().invoke(main, ["diff", str(tmp_path / "my archive"), str(REPO / "sample_traces" / "mlp")])
    assert result.exit_code == 2, result.output
    assert f"compare two of its runs with kernelscope diff --archive '{tmp_path / 'my archive'}' ID_A ID_B" in (
        result.output
    ), result.output
