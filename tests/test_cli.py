"""The kernelscope command: each subcommand end to end, output switches, and bad input."""

import gzip
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import REPO, SHARED_TRACES
from kernelscope.analyzer import load_run
from kernelscope.cli import main

MISC = next(p for p in SHARED_TRACES if p.name == "misc.json.gz")
DEMO = REPO / "sample_traces" / "demo"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def demo_dir(demo_command):
    folder, output = demo_command
    assert "multi_head_attention_forward" in output and "run directory: demo-run" in output
    assert "kernelscope demo (" in output and "): time by call" in output, "titled as analyze titles it"
    return folder / "demo-run"


def test_demo_writes_a_run_that_analyze_reads(demo_dir):
    result = invoke("analyze", demo_dir, "--format", "csv", "--top-k", "3")
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("function_name,calls,num_distinct_samples") and len(lines) == 4


def test_analyze_kernels_json_to_file(demo_dir, tmp_path):
    target = tmp_path / "kernels.json"
    assert invoke("analyze", demo_dir, "--kernels", "-o", target).exit_code == 0
    rows = json.loads(target.read_text())  # one JSON document, every row: a file is never cut by --top-k
    assert isinstance(rows, list) and {"module_name", "function_name", "op", "kernel", "kernel_us"} <= rows[0].keys()
    with load_run(demo_dir) as run:
        assert len(rows) == len(run.profiling_df())
    for suffix in (".jsonl", ".ndjson"):
        lines = tmp_path / f"kernels{suffix}"
        assert invoke("analyze", demo_dir, "--kernels", "-o", lines).exit_code == 0
        assert [json.loads(line) for line in lines.read_text().splitlines()] == rows


@pytest.mark.parametrize(
    "args, said",
    [
        (["diff", "--archive", "{missing}", "a", "b"], "--archive names an archive, and {missing} does not exist"),
        (["report", "--archive", "{missing}", "a"], "--archive names an archive, and {missing} does not exist"),
        (["diff", "--archive", "{demo}", "a", "b"], "--archive names an archive, and {demo} is not one"),
        (["analyze", "{missing}", "--run", "a"], "--run names a run of an archive, and {missing} does not exist"),
        (["tree", "{demo}", "--run", "a"], "--run names a run of an archive, and {demo} is not one"),
    ],
)
def test_a_folder_that_is_no_archive_is_named_by_the_option_that_wanted_one(tmp_path, monkeypatch, args, said):
    """diff --archive and report --archive named --run, which the user had not given, and a missing folder as one
    that is not an archive."""
    monkeypatch.chdir(tmp_path)
    where = {"missing": str(tmp_path / "nothere"), "demo": str(REPO / "sample_traces" / "demo")}
    result = CliRunner().invoke(main, [a.format(**where) for a in args])
    assert result.exit_code == 2
    assert result.output.startswith(f"kernelscope: error: {said.format(**where)} (see '")
    assert list(tmp_path.iterdir()) == [], "no report written"


def test_an_unknown_extension_is_refused_in_one_line_before_any_work(tmp_path):
    target = tmp_path / "summary.xlsx"
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "not-loaded"), "-o", str(target)])
    assert result.exit_code == 2 and not target.exists()
    assert result.output.strip().splitlines() == [
        f"kernelscope: error: {target}: has an extension kernelscope does not write "
        "(.csv, .json, .jsonl, .ndjson, .parquet, .txt); or name the format with --format"
    ]
    named = CliRunner().invoke(main, ["analyze", str(MISC), "-o", str(target), "--format", "csv"])
    assert named.exit_code == 0 and target.read_text().startswith("function_name,calls,")


def test_sql_over_the_documented_tables(demo_dir):
    for table in ("events", "kernels", "summary", "samples"):
        result = invoke("sql", demo_dir, f"SELECT count(*) AS n FROM {table}", "--format", "csv")
        assert result.exit_code == 0, result.output
        assert int(result.output.splitlines()[1]) > 0


def test_record_a_factory_target(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "my_models.py").write_text(
        "import torch\nfrom torch import nn\n"
        "def small():\n    return nn.Sequential(nn.Linear(4, 4), nn.ReLU()), [((torch.randn(2, 4),), {})]\n"
    )
    monkeypatch.chdir(tmp_path)
    result = invoke("record", "my_models:small", "--out", tmp_path / "run", "--warmup", "1", "--tag", "team=infra")
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["tags"] == {"team": "infra"} and manifest["warmup_iterations"] == 1


def test_prefixes_read_other_annotation_schemes():
    result = invoke("analyze", MISC, "--module-prefix", "probe:", "--kernels", "--format", "csv")
    assert result.exit_code == 0
    assert "inner,aten::linear,aten::addmm," in result.output, "in no call scope: named after its operator"


def _bad(tmp_path, name, content: bytes):
    path = tmp_path / name
    path.write_bytes(content)
    return path


def bad_inputs(tmp_path):
    whole = gzip.decompress(MISC.read_bytes())
    run_without_trace = tmp_path / "run-no-trace"
    run_without_trace.mkdir()
    (run_without_trace / "manifest.json").write_text('{"format_version": 1}')
    (run_without_trace / "samples.json").write_text('{"format_version": 1, "functions": {}}')
    newer = tmp_path / "run-newer"
    newer.mkdir()
    (newer / "manifest.json").write_text('{"format_version": 99}')
    return {
        "missing file": (tmp_path / "nope.json", "no such run directory or trace file"),
        "empty file": (_bad(tmp_path, "empty.json", b""), "is empty"),
        "truncated JSON": (_bad(tmp_path, "cut.json", whole[: len(whole) // 2]), "truncated"),
        "truncated gzip": (_bad(tmp_path, "cut.json.gz", MISC.read_bytes()[:2000]), "cannot be decompressed"),
        "random bytes": (_bad(tmp_path, "noise.json", os.urandom(5000)), "not valid JSON"),
        "JSON but not a trace": (_bad(tmp_path, "other.json", b'{"hello": [1, 2]}'), "not a Kineto/Chrome trace"),
        "no device events": (_bad(tmp_path, "empty-trace.json", b'{"traceEvents": []}'), "no device events"),
        "run without trace": (run_without_trace, "missing its trace.json.gz"),
        "newer format": (newer, "newer than this kernelscope reads"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing file",
        "empty file",
        "truncated JSON",
        "truncated gzip",
        "random bytes",
        "JSON but not a trace",
        "no device events",
        "run without trace",
        "newer format",
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(case, tmp_path):
    path, message = bad_inputs(tmp_path)[case]
    done = subprocess.run(
        [sys.executable, "-m", "kernelscope.cli", "analyze", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(path) in lines[0] and message in lines[0]
    assert "Traceback" not in done.stderr


def test_existing_run_directory_is_refused_in_the_commands_words(demo_dir, tmp_path, monkeypatch):
    """--force, not the API's overwrite=True; record refuses before its factory builds the model."""
    said = f"kernelscope: error: {demo_dir}: already exists; choose another --out, or replace it with --force\n"
    result = CliRunner().invoke(main, ["demo", "--device", "cpu", "--out", str(demo_dir)])
    assert result.exit_code == 2 and result.output == said
    monkeypatch.chdir(tmp_path)
    (tmp_path / "slow_model.py").write_text("def make():\n    open('built', 'w').close()\n")
    result = CliRunner().invoke(main, ["record", "slow_model.py:make", "--out", str(demo_dir)])
    assert result.exit_code == 2 and result.output == said
    assert not (tmp_path / "built").exists(), "the factory was not called"


def test_bad_sql_is_one_line(demo_dir):
    result = CliRunner().invoke(main, ["sql", str(demo_dir), "SELECT nope FROM kernels"])
    assert result.exit_code == 2 and "the query failed" in result.output


def test_every_command_is_in_the_readme():
    readme = (REPO / "README.md").read_text()
    for name in main.commands:
        assert f"`kernelscope {name} " in readme, f"kernelscope {name} is missing from the README's command table"


def test_a_plain_trace_is_summarized_by_the_operators_its_calls_are_named_after():
    result = invoke("analyze", MISC, "--format", "csv")
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    assert lines[0].split(",")[:2] == ["function_name", "calls"]
    assert [line.split(",")[:2] for line in lines[1:]][:3] == [
        ["aten::copy_", "3"],
        ["aten::nonzero", "1"],
        ["aten::linear", "2"],
    ]


def test_time_by_module_adds_up_to_the_whole_run():
    run_dir = MISC.parent.parent / "gpt2"
    with load_run(run_dir) as run:
        by_module = run.time_by("module_name", top_k=10_000)
        total = run.profiling_df()["kernel_us"].sum()
    assert by_module["time_spent_us"].sum() == pytest.approx(total)
    assert by_module["time_spent_pct"].sum() == pytest.approx(100.0)
    assert list(by_module["time_spent_us"]) == sorted(by_module["time_spent_us"], reverse=True)
    result = invoke("analyze", run_dir, "--by", "module_name", "--top-k", "2", "--format", "csv")
    assert result.output.splitlines()[0] == "module_name,kernels,time_spent_us,time_spent_pct"
    with pytest.raises(ValueError):
        run.time_by("kernel_us; DROP TABLE kernels")


def test_an_os_error_while_working_is_one_line(monkeypatch):
    import errno

    import kernelscope.cli as command

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", "/scratch/run")

    monkeypatch.setattr(command, "load_run_of", full_disk)
    result = CliRunner().invoke(main, ["analyze", str(MISC)])
    assert result.exit_code == 2
    assert result.output.strip() == "kernelscope: error: /scratch/run: No space left on device"


def _csv_rows(result) -> list[list[str]]:
    import csv
    import io

    assert result.exit_code == 0, result.output
    return list(csv.reader(io.StringIO(result.output)))[1:]


def test_top_k_0_means_all_and_a_file_gets_every_row_unless_cut():
    with load_run(DEMO) as run:
        functions, kernels = len(run.describe(None)), len(run.profiling_df())
        operators = len(run.time_by("op", None))
    assert functions > 10 and kernels > 10
    assert len(_csv_rows(invoke("analyze", DEMO, "--top-k", "0", "--format", "csv"))) == functions
    assert len(_csv_rows(invoke("analyze", DEMO, "--format", "csv"))) == functions, "csv is not cut by default"
    assert len(_csv_rows(invoke("analyze", DEMO, "--top-k", "3", "--format", "csv"))) == 3
    assert len(_csv_rows(invoke("analyze", DEMO, "--by", "op", "--top-k", "0", "--format", "csv"))) == operators
    assert len(_csv_rows(invoke("analyze", DEMO, "--kernels", "--format", "csv"))) == kernels
    table = invoke("analyze", DEMO, "--top-k", "0")
    assert "time by op" not in table.output and "shown" not in table.output
    assert table.output.count("│ linear ") == 1 and table.output.count("│ torch.cat ") == 1


def test_kernels_honour_top_k_the_longest_first_with_a_footer_of_what_is_left_out():
    with load_run(DEMO) as run:
        longest = run.profiling_df().sort_values("kernel_us", ascending=False)["kernel_us"].head(4).tolist()
        total = len(run.profiling_df())
    rows = _csv_rows(invoke("analyze", DEMO, "--kernels", "--top-k", "4", "--format", "csv"))
    assert [float(row[4]) for row in rows] == pytest.approx(longest)
    table = invoke("analyze", DEMO, "--kernels")
    assert table.exit_code == 0 and "kernels, the longest first" in table.output
    assert f"10 of {total} device rows shown; --top-k 0 shows all." in table.output
    assert table.output.count("│ kernel ") == 10, "ten rows in a table by default"


def test_tables_show_short_kernel_names_and_files_the_full_ones():
    vit = REPO / "sample_traces" / "vit_b16"
    with load_run(vit) as run:
        (gelu,) = run.sql("SELECT DISTINCT kernel FROM kernels WHERE kernel LIKE '%GeluCUDAKernelImpl%'")["kernel"]
    assert gelu.startswith("void at::native::vectorized_elementwise_kernel<") and len(gelu) > 400
    csv = invoke("analyze", vit, "--by", "kernel", "--top-k", "0", "--format", "csv")
    assert csv.exit_code == 0 and f'"{gelu}"' in csv.output, "csv keeps the kernel's full name"
    table = invoke("analyze", vit, "--by", "kernel", "--top-k", "0")
    assert "│ vectorized_elementwise_kernel<GeluCUDAKernelImpl> " in table.output and "GeluType" not in table.output
    full = invoke("analyze", vit, "--by", "kernel", "--top-k", "0", "--full-names")
    assert "GeluType" in full.output
    kernels = invoke("analyze", vit, "--kernels", "--top-k", "0")
    assert "GeluType" not in kernels.output and "GeluCUDAKernel" in kernels.output  # the short name, folded to fit


def test_numbers_print_with_one_format_per_column_and_never_minus_zero():
    table = invoke("diff", MISC, REPO / "sample_traces" / "plain_kineto" / "threads.json.gz", "--top-k", "0")
    body = [line.split("│") for line in table.output.splitlines() if line.startswith("│")]
    assert body and "-0.000" not in table.output
    for column in (3, 4, 5, 8, 9):  # times and shares: three decimals in every row, 100 and 0 included
        assert all(row[column].strip().endswith((".000", "inf", "-")) or row[column].strip()[-4] == "." for row in body)
    assert any(row[9].strip() == "100.000" for row in body) and any(row[9].strip() == "0.000" for row in body)
    csv = invoke("sql", DEMO, "SELECT function_name, calls, time_spent_us, -0.0 AS z FROM summary", "--format", "csv")
    lines = csv.output.strip().splitlines()
    linear = next(line for line in lines if line.startswith("linear,"))
    assert linear.split(",")[1] == "14", "a whole number is written as one: 14, not 14.0"
    assert all(len(line.split(",")[2].split(".")[-1]) <= 15 for line in lines[1:]), "15 significant digits at most"
    assert {line.split(",")[3] for line in lines[1:]} == {"0"}, "-0.0 is written 0"


def test_record_finds_a_factory_next_to_the_user_and_what_it_imports_later(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "helpers.py").write_text("WIDTH = 4\n")
    (tmp_path / "factory.py").write_text(
        "import torch\nfrom torch import nn\n"
        "def small():\n    import helpers  # imported when called, as a factory may\n"
        "    return nn.Linear(helpers.WIDTH, 2), [((torch.randn(3, helpers.WIDTH),), {})]\n"
    )
    monkeypatch.chdir(tmp_path)
    result = invoke("record", "factory:small", "--out", tmp_path / "runs" / "deep" / "small", "--warmup", "0")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "runs" / "deep" / "small" / "manifest.json").is_file(), "missing parents are created"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    by_path = invoke("record", tmp_path / "factory.py:small", "--out", elsewhere / "run", "--warmup", "0")
    assert by_path.exit_code == 0, by_path.output
    assert "kernelscope record" in by_path.output and "time by call" in by_path.output


@pytest.mark.parametrize(
    "target, factory, message",
    [
        ("nosuchmod:f", None, "nosuchmod:f: no module named 'nosuchmod' here"),
        ("bad_small:small", "def small():\n    return 3\n", "bad_small:small: returned an int, not (module, samples)"),
        ("bad_none:nothing", "X = 1\n", "bad_none:nothing: bad_none has no attribute 'nothing'"),
        ("bad_x:X", "X = 1\n", "bad_x:X: bad_x.X is an int, not a factory to call"),
        ("no-colon", None, "no-colon: is not a target: expected 'pkg.module:factory'"),
    ],
)
def test_record_errors_are_one_line_and_exit_2(target, factory, message, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    if factory is not None:
        (tmp_path / f"{target.partition(':')[0]}.py").write_text(factory)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["record", target, "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"kernelscope: error: {message}") and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_mistyped_module_prints_no_traceback(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "kernelscope.cli", "record", "nosuchmod:f"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.startswith("kernelscope: error: nosuchmod:f: no module named") and done.stderr.count("\n") == 1


def test_click_usage_errors_say_kernelscope_error_and_exit_2():
    for args in (["analyze"], ["analyze", str(MISC), "--top-k", "-1"], ["analyze", str(MISC), "--nope"], ["nope"]):
        result = CliRunner().invoke(main, args)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("kernelscope: error: "), args


@pytest.mark.parametrize("args", [["report", str(MISC), "-o"], ["analyze", str(MISC), "--top-k"]])
def test_an_option_without_its_value_names_the_command_to_ask_for_help(args):
    """click's parser raises "Option '-o' requires an argument." with no command attached: the hint names it all
    the same, as every other usage error's does (docs/errors.md)."""
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert (
        result.output
        == f"kernelscope: error: Option {args[-1]!r} requires an argument. (see 'main {args[0]} --help')\n"
    )


@pytest.mark.parametrize("number", ["nan", "inf", "-nan", "1e400"])
@pytest.mark.parametrize(
    "args",
    [["tree", str(DEMO), "--min-pct"], ["diff", str(DEMO), str(DEMO), "--fail-above"], ["bench", str(DEMO), "--rtol"]],
    ids=["tree-min-pct", "diff-fail-above", "bench-rtol"],
)
def test_a_threshold_that_is_not_a_finite_number_is_a_usage_error(args, number):
    """A NaN threshold compares false with everything (--fail-above nan would never fail) and inf reached the tree's
    query as a column name: both are refused before anything is loaded."""
    result = CliRunner().invoke(main, [*args, number])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith("kernelscope: error: ") and "is not a finite number" in lines[0], lines


@pytest.mark.parametrize("command", ["analyze", "tree"])
def test_two_runs_where_one_is_read_point_to_diff(command):
    """`analyze A B` (a newcomer's way to compare) said only click's 'Got unexpected extra argument'."""
    result = CliRunner().invoke(main, [command, str(DEMO), str(DEMO)])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].endswith(f"{command} reads one run: 'kernelscope diff A B' compares two"), lines


def test_a_tree_share_over_100_percent_is_a_usage_error():
    """--min-pct 200 was taken: every line folded into '… N more under 200%'."""
    result = CliRunner().invoke(main, ["tree", str(DEMO), "--min-pct", "200"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and "0<=x<=100" in lines[0], result.output


def test_the_tree_of_a_share_that_is_not_a_finite_number_is_a_value_error():
    from kernelscope.analyzer.tree import shown_tree

    with load_run(DEMO) as run:
        for number in (float("nan"), float("inf"), -1.0):
            with pytest.raises(ValueError, match="finite number >= 0"):
                shown_tree(run, min_pct=number)


def test_ctrl_c_exits_130(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "interrupted.py").write_text(
        "import torch\nfrom torch import nn\n"
        "class Stop(nn.Module):\n    def forward(self, x):\n        raise KeyboardInterrupt\n"
        "def model():\n    return Stop(), [((torch.randn(2),), {})]\n"
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["record", "interrupted:model", "--out", str(tmp_path / "run")])
    assert result.exit_code == 130 and "kernelscope: interrupted" in result.output
    assert not (tmp_path / "run").exists()


def test_one_rank_gets_its_own_title_and_footer_and_conflicting_options_are_refused(tmp_path):
    from conftest import make_job

    job = make_job(tmp_path / "job", {0: REPO / "sample_traces" / "mlp", 1: DEMO})
    one = invoke("analyze", job, "--rank", "1")
    assert f"{job} --rank 1: time by call" in one.output
    with load_run(DEMO) as demo:
        rows, total = len(demo.profiling_df()), demo.profiling_df()["kernel_us"].sum()
    assert f"rank 1: {rows} device rows, {total:,.1f} µs in all" in one.output
    by_op = _csv_rows(invoke("analyze", job, "--rank", "0", "--by", "op", "--top-k", "0", "--format", "csv"))
    assert sum(int(row[1]) for row in by_op) == 6, "--by follows --rank: the 6 rows of mlp"
    for extra, option in ((["--rank", "0"], "--rank"), (["--by", "op"], "--by"), (["--kernels"], "--kernels")):
        refused = CliRunner().invoke(main, ["analyze", str(job), "--by-rank", *extra])
        assert refused.exit_code == 2 and f"--by-rank is a summary of calls per rank; with {option}" in refused.output
    both = CliRunner().invoke(main, ["analyze", str(job), "--kernels", "--by", "op"])
    assert both.exit_code == 2 and "give one of the two" in both.output


def test_an_archived_run_is_titled_by_its_id_and_diff_of_an_archive_says_how(tmp_path):
    from kernelscope.analyzer import archive_runs
    from kernelscope.analyzer.archive import Archive

    archive = tmp_path / "archive"
    archive_runs([DEMO], archive)
    run_id = Archive(archive).resolve("demo")
    titled = invoke("analyze", archive, "--run", "demo", "--top-k", "2")
    assert f"{archive} --run {run_id}: time by call" in titled.output
    refused = CliRunner().invoke(main, ["diff", str(archive), str(DEMO)])
    assert refused.exit_code == 2 and f"kernelscope diff --archive {archive} ID_A ID_B" in refused.output
    assert "--run ID" not in refused.output


def test_the_default_run_directory_is_ignored_by_git():
    import fnmatch

    from kernelscope.cli import _default_run_dir

    patterns = (REPO / ".gitignore").read_text().split()
    name = _default_run_dir("demo").name
    assert any(fnmatch.fnmatch(name + "/", pattern.strip("/") + "/") for pattern in patterns if "*" in pattern)


def test_events_the_profiler_lost_are_one_warning_line_as_the_others(tmp_path):
    """A trace whose profiler lost a launch: the footer's warning carries the prefix of every CLI warning."""

    def span(name, cat, ts, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 5, "args": args}

    kernel = {**span("k", "kernel", 40, correlation=2, device=0, stream=7), "pid": 0, "tid": 7}
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": [span("aten::mm", "cpu_op", 0), kernel]}))
    for args in (["analyze", trace], ["analyze", trace, "--rank", 0]):
        result = invoke(*args)
        assert result.exit_code == 0
        assert result.stderr == (  # no launch in the whole trace: not a count of lost ones
            "kernelscope: warning: the trace holds no kernel launches (the profiler lost them, or the tool that "
            "wrote it keeps none): its 1 device event is in no call or module.\n"
        )
    launched = span("cudaLaunchKernel", "cuda_runtime", 2, correlation=3)  # a launch whose kernel was lost
    trace.write_text(json.dumps({"traceEvents": [span("aten::mm", "cpu_op", 0), launched, kernel]}))
    result = invoke("analyze", trace)
    assert result.exit_code == 0
    assert result.stderr == (
        "kernelscope: warning: the profiler lost events: 1 launches without device event, 1 device events "
        "without launch.\n"
    )


def test_the_footer_counts_rows_as_it_counts_time():
    """10,133 rows with their thousands separated, like the µs beside them; one row is a row."""
    many = REPO / "sample_traces" / "external" / "kineto_resnet50_autograd_api_2021-02.pt.trace.json.gz"
    result = CliRunner().invoke(main, ["analyze", str(many), "--kernels"])
    assert result.exit_code == 0, result.output
    assert "10 of 10,133 device rows shown; --top-k 0 shows all." in result.output
    assert "\n10,133 device rows, 987,884.0 µs in all;" in result.output
    one = CliRunner().invoke(main, ["analyze", str(REPO / "sample_traces" / "plain_kineto" / "with_stack.json.gz")])
    assert one.exit_code == 0 and "\n1 device row, 3.6 µs in all;" in one.output, one.output


def test_a_tilde_the_shell_left_is_the_home_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "runs").mkdir()
    os.symlink(DEMO, tmp_path / "runs" / "demo")
    read = CliRunner().invoke(main, ["analyze", "~/runs/demo", "--format", "csv", "--output=~/summary.csv"])
    assert read.exit_code == 0, read.output
    assert (tmp_path / "summary.csv").read_text().startswith("function_name,calls,")
    tree = CliRunner().invoke(main, ["tree", "~/runs/demo", "--depth", "0"])
    assert tree.exit_code == 0 and str(tmp_path / "runs" / "demo") in tree.output


# The command run as its entry point does, with the analyzer's instance maker watched from the analyzer's import on
# (which starts making the instance on a thread): whether the load took that instance, and where any other was made.
INSTANCE_MADE_ON = r"""
import sys, threading
from kernelscope.analyzer import connection

making = connection._making
made_on = []
make = connection._instance


def watched(*args, **kwargs):
    made_on.append(threading.current_thread().name)
    return make(*args, **kwargs)


connection._instance = watched
sys.argv = ["kernelscope", *sys.argv[1:]]
from kernelscope.entry import main

try:
    main()
except SystemExit as stopped:
    assert not stopped.code, stopped.code
print("made at import", making is not None, "taken", connection._making is None, "made on", made_on)
"""


def test_a_loading_command_takes_the_duckdb_instance_made_on_a_thread_while_the_analyzer_imports():
    done = subprocess.run(
        [sys.executable, "-c", INSTANCE_MADE_ON, "analyze", str(REPO / "sample_traces" / "mlp")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last in (
        "made at import True taken True made on []",
        "made at import True taken True made on ['kernelscope-connect']",
    )


@pytest.mark.parametrize(
    ("command", "name", "what"),
    [(["analyze", "{run}"], "x.parquet", "a Parquet file"), (["sql", "{run}", "SELECT 1"], "x.duckdb", "a database")],
)
def test_an_output_duckdb_writes_at_a_path_that_is_not_utf8_is_refused_before_it_is_made(tmp_path, command, name, what):
    folder = tmp_path / os.fsdecode(b"caf\xe9")  # a folder named in Latin-1: DuckDB takes UTF-8 paths only
    folder.mkdir()
    args = [part.format(run=REPO / "sample_traces" / "mlp") for part in command]
    result = invoke(*args, "-o", folder / name)
    assert result.exit_code == 2
    assert result.stderr.endswith(f": is not a UTF-8 path, which DuckDB cannot write {what} at\n"), result.stderr
    assert not any(folder.iterdir())


def test_python_dash_m_kernelscope_is_the_command():
    """`.venv/bin/python -m kernelscope`, where the venv's scripts are not on PATH, said 'No module named
    kernelscope.__main__'."""
    run = str(REPO / "sample_traces" / "mlp")
    done = subprocess.run(
        [sys.executable, "-m", "kernelscope", "analyze", run, "--top-k", "2", "--format", "csv"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == invoke("analyze", run, "--top-k", "2", "--format", "csv").output
    missing = subprocess.run(
        [sys.executable, "-m", "kernelscope", "analyze", "nope"], capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 2
    assert missing.stderr == "kernelscope: error: nope: no such run directory or trace file\n"


HUGE = "99999999999999999999999"  # past 64 bits: DuckDB's LIMIT of --kernels --top-k was a traceback


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["bench", "{run}", "--repeat", "10001"], "--repeat"),
        (["bench", "{run}", "--repeat", HUGE], "--repeat"),
        (["bench", "{run}", "--warmup", "10001"], "--warmup"),
        (["bench", "{run}", "--top-k", HUGE], "--top-k"),
        (["record", "mod:make", "--warmup", "1001"], "--warmup"),
        (["record", "mod:make", "--top-k", HUGE], "--top-k"),
        (["demo", "--top-k", HUGE], "--top-k"),
        (["analyze", "{run}", "--kernels", "--top-k", HUGE], "--top-k"),
        (["analyze", "{run}", "--rank", HUGE], "--rank"),
        (["analyze", "{run}", "--rank", "-1"], "--rank"),
        (["diff", "{run}", "{run}", "--top-k", HUGE], "--top-k"),
        (["runs", "{run}", "--top-k", HUGE], "--top-k"),
        (["tree", "{run}", "--depth", HUGE], "--depth"),
    ],
)
def test_a_count_past_its_bound_is_a_usage_error(args, option):
    """--repeat 10**9 timed calls ran for days: every count an option takes has a bound, and past it the command
    stops at once with one line, exit 2, before anything is read or run."""
    result = CliRunner().invoke(main, [arg.format(run=REPO / "sample_traces" / "mlp") for arg in args])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"kernelscope: error: Invalid value for '{option}': ") and "is not in the range" in line
    assert result.stdout == ""


@pytest.mark.parametrize(
    "args, refusal",
    [
        (["analyze", DEMO, "--full-names"], "--full-names names kernels: with --kernels or --by kernel"),
        (["analyze", DEMO, "--by", "op", "--full-names"], "--full-names names kernels: with --kernels or --by kernel"),
        (["tree", DEMO, "--full-names"], "--full-names names the kernels --show-calls lists: add --show-calls"),
    ],
)
def test_full_names_where_no_kernel_is_shown_is_refused_not_dropped(args, refusal):
    """`tree RUN --full-names` and `analyze RUN --full-names` (time by call) printed what they print without it: the
    option did nothing, and said nothing. It is a usage error there, as --inclusive without --by module_name is."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 2 and refusal in result.stderr, result.output
    for shown in (["analyze", DEMO, "--by", "kernel"], ["analyze", DEMO, "--kernels"], ["tree", DEMO, "--show-calls"]):
        assert CliRunner().invoke(main, [*map(str, shown), "--full-names"]).exit_code == 0, shown


def test_a_cpu_recordings_row_notes_count_cpu_operators_as_its_footer_does(demo_run):
    """`analyze CPU_RUN --kernels --top-k 2` said "2 of 390 device rows shown" above "390 CPU operator rows, …", and
    `--by kernel` "3 of 46 kernels shown" over a column of cpu_operators: the notes name the rows as the footer
    does."""
    run = str(demo_run[-1])
    rows = CliRunner().invoke(main, ["analyze", run, "--kernels", "--top-k", "2"])
    assert rows.exit_code == 0 and "CPU operator rows, " in rows.stdout, rows.output
    assert " CPU operator rows shown; --top-k 0 shows all." in rows.stdout and "device rows" not in rows.stdout
    grouped = CliRunner().invoke(main, ["analyze", run, "--by", "kernel", "--top-k", "2"])
    assert grouped.exit_code == 0 and " CPU operators shown; --top-k 0 shows all." in grouped.stdout, grouped.output
    gpu = CliRunner().invoke(main, ["analyze", str(DEMO), "--by", "kernel", "--top-k", "2"])
    assert "2 of 19 kernels shown" in gpu.stdout, gpu.output


def test_analyze_by_and_diff_level_take_each_others_words():
    """`analyze --by module` (diff's --level word) and `diff --level module_name` (analyze's) were usage errors: the
    two commands name the same grouping two ways."""
    run = REPO / "sample_traces" / "mlp"
    for alias, name in (("module", "module_name"), ("function_name", "function")):
        by_alias = invoke("analyze", run, "--by", alias, "--csv")
        assert by_alias.exit_code == 0 and by_alias.output == invoke("analyze", run, "--by", name, "--csv").output
    for alias, name in (("module_name", "module"), ("function_name", "function")):
        by_alias = invoke("diff", run, run, "--level", alias, "--csv")
        assert by_alias.exit_code == 0 and by_alias.output == invoke("diff", run, run, "--level", name, "--csv").output
