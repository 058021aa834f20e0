"""The kernelscope command: each subcommand end to end, output switches, and bad input."""

import gzip
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import SHARED_TRACES
from kernelscope.cli import main

MISC = next(p for p in SHARED_TRACES if p.name == "misc.json.gz")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("cli") / "demo-run"
    result = invoke("demo", "--device", "cpu", "--out", out)
    assert result.exit_code == 0, result.output
    assert "multi_head_attention_forward" in result.output and f"run directory: {out}" in result.output
    return out


def test_demo_writes_a_run_that_analyze_reads(demo_dir):
    result = invoke("analyze", demo_dir, "--format", "csv", "--top-k", "3")
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("function_name,calls,num_distinct_samples") and len(lines) == 4


def test_analyze_kernels_json_to_file(demo_dir, tmp_path):
    target = tmp_path / "kernels.json"
    assert invoke("analyze", demo_dir, "--kernels", "-o", target).exit_code == 0
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    assert rows and {"module_name", "function_name", "op", "kernel", "kernel_us"} <= rows[0].keys()


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


def test_existing_run_directory_is_refused(demo_dir):
    result = CliRunner().invoke(main, ["demo", "--device", "cpu", "--out", str(demo_dir)])
    assert result.exit_code == 2 and "already exists" in result.output


def test_bad_sql_is_one_line(demo_dir):
    result = CliRunner().invoke(main, ["sql", str(demo_dir), "SELECT nope FROM kernels"])
    assert result.exit_code == 2 and "the query failed" in result.output


def test_every_command_is_in_the_readme():
    from conftest import REPO

    readme = (REPO / "README.md").read_text()
    for name in main.commands:
        assert f"`kernelscope {name} " in readme, f"kernelscope {name} is missing from the README's command table"


def test_a_plain_trace_is_summarized_by_the_operators_its_calls_are_named_after():
    result = invoke("analyze", MISC, "--format", "csv")
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    assert lines[0].split(",")[:2] == ["function_name", "calls"]
    assert [line.split(",")[:2] for line in lines[1:]][:3] == [
        ["aten::copy_", "3.0"],
        ["aten::nonzero", "1.0"],
        ["aten::linear", "2.0"],
    ]


def test_time_by_module_adds_up_to_the_whole_run():
    from kernelscope.analyzer import load_run

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
