"""kernelscope bench: the command's output switches, exit codes (1 on a wrong alternative, 2 on bad input), the
cross-device warning, and the standalone scripts it writes (one of them run)."""

import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.cli import main

torch = pytest.importorskip("torch")

ALTERNATIVES = """
import torch

def addmm(bias, x, weight):
    return torch.addmm(bias, x, weight)

def addmm_without_bias(bias, x, weight):
    return x @ weight

def addmm_in_halves(bias, x, weight):  # another order of accumulation: a result off by float32 rounding
    half = x.shape[1] // 2
    return (bias + x[:, :half] @ weight[:half]) + x[:, half:] @ weight[half:]
"""


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def alternatives(tmp_path, monkeypatch):
    (tmp_path / "my_alternatives.py").write_text(ALTERNATIVES)
    monkeypatch.chdir(tmp_path)
    yield "my_alternatives"
    sys.modules.pop("my_alternatives", None)


def test_a_matching_alternative_exits_0_and_a_wrong_one_exits_1(layouts_run, alternatives):
    _, out = layouts_run
    good = invoke("bench", out, "--function", "torch.addmm", "--repeat", 2, "--warmup", 0,
                  "--against", f"same={alternatives}:addmm", "--format", "csv")  # fmt: skip
    assert good.exit_code == 0, good.output
    rows = good.stdout.strip().splitlines()
    assert rows[0].startswith("function_name,sample_id,implementation,status,signature,calls,recorded_us")
    assert len(rows) == 5 and "projected saving of same on torch.addmm" in good.stderr
    wrong = invoke("bench", out, "--function", "torch.addmm", "--repeat", 2, "--warmup", 0,
                   "--against", f"nobias={alternatives}:addmm_without_bias")  # fmt: skip
    assert wrong.exit_code == 1
    assert "nobias does not match the original: torch.addmm sample 0 (max abs err" in wrong.stderr
    assert "mismatch" in wrong.stdout and "projected saving" in wrong.stdout


def test_bad_alternatives_and_runs_are_one_line_with_exit_2(layouts_run, alternatives):
    _, out = layouts_run
    for args, message in [
        (["--against", "nameonly"], "is not NAME=MODULE:CALLABLE"),
        (["--against", "x=no_such_module_here:f"], "no module named 'no_such_module_here' here ("),
        (["--against", f"x={alternatives}:nope"], "has no attribute 'nope'"),
        (
            ["--function", "gelu", "--function", "relu", "--against", f"x={alternatives}:addmm"],
            "--against replaces one call: name it with one --function NAME, not 2",
        ),
        (["--against", f"x={alternatives}:addmm"], "--against replaces one call: name it with one --function NAME ("),
        (["--function", "nope"], "no call named 'nope'"),
        *(
            []
            if torch.cuda.is_available()
            else [(["--device", "cuda"], "Invalid value for --device cuda: torch sees no CUDA device (see")]
        ),  # in the command's words, where it said "device='cuda' was asked for" as bench()'s argument
    ]:
        result = CliRunner().invoke(main, ["bench", str(out), *args])
        assert result.exit_code == 2 and message in result.output, (args, result.output)
    result = CliRunner().invoke(main, ["bench", str(REPO / "sample_traces" / "mlp"), "--device", "cpu"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("kernelscope: error: ")
    assert "sample_tensor_limit_mb=None" in result.stderr


def test_a_cuda_recording_replayed_on_the_cpu_warns_and_writes_every_column(tmp_path):
    target = tmp_path / "bench.json"
    result = invoke("bench", REPO / "sample_traces" / "demo", "--function", "Tensor.__add__", "--device", "cpu",
                    "--repeat", 2, "--warmup", 0, "-o", target)  # fmt: skip
    assert result.exit_code == 0
    assert result.stderr.startswith("kernelscope: warning: ")
    assert "recorded on cuda (NVIDIA H200) and is replayed on cpu" in result.stderr
    rows = json.loads(target.read_text())  # .json: one document
    assert [r["sample_id"] for r in rows] == [0, 1] and {r["replayed_on"] for r in rows} == {"cpu"}
    assert all(r["ratio"] is None and r["recorded_us"] > 0 for r in rows)
    assert invoke("bench", REPO / "sample_traces" / "demo", "--device", "cpu", "-o", target).exit_code == 2
    table = invoke("bench", REPO / "sample_traces" / "demo", "--function", "Tensor.__add__", "--device", "cpu",
                   "--repeat", 2, "--warmup", 0)  # fmt: skip
    assert table.exit_code == 0 and "recorded on the CPU" not in table.stdout, "a CUDA recording's times are kernels'"


def test_written_scripts_run_standalone_and_keep_the_recorded_layouts(layouts_run, tmp_path):
    _, out = layouts_run
    scripts = tmp_path / "scripts"
    result = invoke("bench", out, "--function", "gelu", "--function", "softplus", "--repeat", 1, "--warmup", 0,
                    "--scripts", scripts, "--format", "csv")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in scripts.iterdir()) == ["gelu.py", "gelu.samples.pt"], "no script without samples"
    store = torch.load(scripts / "gelu.samples.pt", weights_only=True)
    assert [s["args"][0].stride() for s in store["samples"]] == [(32, 1), (32, 1)]
    assert [s["calls"] for s in store["samples"]] == [2, 1]
    ran = subprocess.run(
        [sys.executable, str(scripts / "gelu.py"), "--repeat", "2", "--warmup", "0"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.strip().splitlines()
    assert lines[0].split()[:4] == ["sample", "calls", "recorded_us", "replayed_us"] and len(lines) == 3
    assert "float32[16,8]{32,1}@cpu" in lines[1] and "note:" not in ran.stdout
    again = invoke("bench", out, "--function", "gelu", "--repeat", 1, "--warmup", 0, "--scripts", scripts)
    assert again.exit_code == 2 and "already exists" in again.output


def test_a_bench_that_fails_leaves_no_script_and_keeps_the_ones_there(layouts_run, tmp_path, monkeypatch):
    """The scripts are written as each call is benched: where a later call failed, the earlier ones' scripts were
    left (and with --force, had replaced the user's). They are put in place once every call has been benched."""
    from kernelscope.analyzer.errors import KernelscopeError
    from kernelscope.recorder import bench as recorder_bench

    benched = []
    original = recorder_bench._bench_function

    def fails_second(function, *args):
        benched.append(function)
        if len(benched) == 2:
            raise KernelscopeError(None, f"{function} failed")
        return original(function, *args)

    monkeypatch.setattr(recorder_bench, "_bench_function", fails_second)
    _, out = layouts_run
    args = ["bench", out, "--function", "gelu", "--function", "softplus", "--repeat", 1, "--warmup", 0]
    scripts = tmp_path / "scripts"
    result = CliRunner().invoke(main, [str(a) for a in [*args, "--scripts", scripts]])
    assert result.exit_code == 2 and result.stderr == "kernelscope: error: softplus failed\n", result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "no scripts folder, no staging folder"
    scripts.mkdir()
    (scripts / "gelu.py").write_text("the user's own")
    benched.clear()
    result = CliRunner().invoke(main, [str(a) for a in [*args, "--scripts", scripts, "--force"]])
    assert result.exit_code == 2, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scripts"]
    assert (
        sorted(p.name for p in scripts.iterdir()) == ["gelu.py"]
        and (scripts / "gelu.py").read_text() == "the user's own"
    )


def test_every_column_and_option_is_documented():
    from kernelscope.bench_command import bench as command
    from kernelscope.recorder.bench import COLUMNS

    text = (REPO / "docs" / "bench.md").read_text()
    for column in COLUMNS:
        assert f"`{column}`" in text, f"docs/bench.md does not document the column {column!r}"
    for option in command.params:
        for flag in option.opts:
            if flag.startswith("--"):
                assert f"`{flag}" in text, f"docs/bench.md does not document {flag}"


def _first_table(output: str) -> tuple[list[str], list[str]]:
    """The column names of the first table in ``output`` (each header's lines joined) and its body's lines."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    body = next(i for i in range(start, len(lines)) if lines[i].startswith("┡"))
    end = next(i for i in range(body, len(lines)) if lines[i].startswith("└"))
    cells = [[cell.strip() for cell in line.strip("┃").split("┃")] for line in lines[start + 1 : body]]
    return ["".join(parts) for parts in zip(*cells, strict=True)], lines[start : end + 1]


def test_the_terminal_table_fits_120_columns_with_what_a_first_look_needs(layouts_run, alternatives):
    """16 columns folded every name to 12 characters and the signature over six lines: the terminal shows the
    columns that say something, the signature last, and says where the others are."""
    _, out = layouts_run
    args = ["bench", str(out), "--function", "torch.addmm", "--repeat", "2", "--warmup", "0"]
    plain = CliRunner().invoke(main, args, env={"COLUMNS": "120"})
    assert plain.exit_code == 0, plain.output
    header, table = _first_table(plain.stdout)
    assert header == [
        "function_name", "sample_id", "status", "calls", "recorded_us", "replayed_us", "ratio", "share_pct", "signature"
    ]  # fmt: skip
    assert max(map(len, table)) <= 120
    assert plain.stdout.splitlines()[-1].startswith("ratio = replayed_us / recorded_us; every column (min_us")
    notes = plain.stdout.split("┘\n")[-1]  # the lines under the table, wrapped at 120 columns
    assert notes.startswith("recorded on the CPU: recorded_us are the self times"), "and why a CPU recording's "
    "ratios are far from 1 (docs/bench.md)"
    compared = CliRunner().invoke(main, [*args, "--against", f"halves={alternatives}:addmm_in_halves"],
                                  env={"COLUMNS": "120"})  # fmt: skip
    assert compared.exit_code == 0, compared.output
    header, table = _first_table(compared.stdout)
    assert header[2:6] == ["implementation", "status", "speedup", "max_abs_err"]
    errors = [line.split("│")[6].strip() for line in table if "│ halves " in line]
    assert errors and all(e != "0.000" and float(e) >= 0 for e in errors), "three significant digits, never 0.000"


def test_an_archive_is_refused_as_one_with_no_sample_tensors(tmp_path):
    from kernelscope.analyzer import archive_runs

    archive_runs([REPO / "sample_traces" / "mlp"], tmp_path / "arch")
    refused = invoke("bench", tmp_path / "arch")
    assert refused.exit_code == 2
    assert "is an archive, which keeps no sample tensors to replay" in refused.output


def test_a_written_script_lines_up_its_columns_refuses_no_repeats_and_ends_quietly_on_a_closed_pipe(
    layouts_run, tmp_path
):
    """A script's header and rows were laid out apart (min_us and max_us 7 wide under headers placed otherwise, a
    10 ms call pushed the row out of line), --repeat 0 ended in a traceback, and ``python gelu.py | head -1`` printed
    a BrokenPipeError traceback."""
    _, out = layouts_run
    scripts = tmp_path / "scripts"
    result = invoke("bench", out, "--function", "gelu", "--repeat", 1, "--warmup", 0, "--scripts", scripts, "--csv")
    assert result.exit_code == 0, result.output
    script = [sys.executable, str(scripts / "gelu.py"), "--warmup", "0"]
    slow = scripts / "slow.py"  # FUNCTION replaced, as the script invites, by a call of 2 ms: times of 4 digits
    source = (scripts / "gelu.py").read_text()
    sleeper = 'FUNCTION = lambda *a, **k: __import__("time").sleep(0.002)'
    slow.write_text(re.sub(r"(?m)^FUNCTION = .*$", sleeper, source))
    ran = subprocess.run([sys.executable, str(slow), "--repeat", "2", "--warmup", "0"], capture_output=True, text=True,
                         timeout=300, cwd=scripts)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    header, *rows = ran.stdout.splitlines()
    ends = [m.end() for m in re.finditer(r"\S+", header)][:6]  # sample … max_us, right-aligned
    assert rows and all(float(row.split()[4]) > 1000 for row in rows)
    for row in rows:
        assert all(row[end - 1] != " " and (end == len(row) or row[end] == " ") for end in ends), (header, row)
    refused = subprocess.run([*script, "--repeat", "0"], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1].endswith("--repeat: 0 is not a whole number of 1 or more")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the script writes a line
    try:
        closed = subprocess.run([*script, "--repeat", "1"], stdout=write, stderr=subprocess.PIPE, timeout=300)
    finally:
        os.close(write)
    assert closed.returncode == 1 and b"Traceback" not in closed.stderr and b"BrokenPipe" not in closed.stderr


def test_the_terminal_tables_fit_80_columns_and_name_the_columns_they_left_out(layouts_run, alternatives):
    """In 80 columns the table was 96 characters wide (every line wrapped over two): bench kept every column, its
    numbers whole. It now leaves out the last columns that do not fit, as analyze does, and names them; with
    --against the alternative's speedup and error come before the times, and the projected saving's table shows
    the saving and speedup first."""
    _, out = layouts_run
    args = ["bench", str(out), "--function", "torch.addmm", "--repeat", "2", "--warmup", "0"]
    alone = ["function_name", "sample_id", "status", "calls", "recorded_us", "replayed_us", "ratio", "share_pct"]
    against = ["function_name", "sample_id", "implementation", "status", "speedup", "max_abs_err", "calls"]
    against += ["recorded_us", "replayed_us", "ratio", "share_pct", "saving_us"]
    saving = ["function_name", "implementation", "saving_us", "saving_pct", "speedup"]
    saving += ["samples", "calls", "original_us", "alternative_us"]
    for extra, order, shown in [([], alone, 6), (["--against", f"halves={alternatives}:addmm_in_halves"], against, 6)]:
        result = CliRunner().invoke(main, [*args, *extra], env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        header, table = _first_table(result.stdout)
        assert max(map(len, result.stdout.splitlines())) <= 80, result.stdout  # the notes under it wrap at spaces
        notes = " ".join(result.stdout.split())
        note = re.search(r"left out to fit 80 columns: (.*?); --format csv or -o FILE shows them", notes)
        assert note and len(header) >= shown, result.stdout
        assert header + note.group(1).split(", ") == [*order, "signature"], result.stdout
    tables = result.stdout.split("projected saving over the pass")
    assert len(tables) == 2, result.stdout
    header, table = _first_table(tables[1])
    assert max(map(len, table)) <= 80 and header == saving[: len(header)] and len(header) >= 4, tables[1]
    # --format csv writes the per-sample rows, and the savings as lines on stderr without these columns
    note = " ".join(tables[1].split("┘\n")[-1].split())
    assert note == f"left out to fit 80 columns: {', '.join(saving[len(header) :])}; ks.bench_savings(frame) has them"
