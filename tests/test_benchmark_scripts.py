"""Every script of benchmarks/ answers --help with its usage and exit 0, without running anything, and
profile_stages.py names the known workloads when given one it does not know."""

import json
import subprocess
import sys

import pytest
from conftest import REPO

BENCHMARKS = REPO / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if 'if __name__ == "__main__"' in p.read_text())

# One process runs every script's --help in turn (torch and the analyzer imported once, not once per script): each
# script as `python SCRIPT --help` would, its exit status and whether it printed a usage.
HELP_ALL = r"""
import contextlib, io, json, os, runpy, sys
os.environ["CUDA_VISIBLE_DEVICES"] = ""
results = {}
for script in sys.argv[1:]:
    sys.argv = [script, "--help"]
    printed = io.StringIO()
    code = "returned"
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code or 0
    except BaseException as exc:
        code = f"{type(exc).__name__}: {exc}"
    results[script] = {"code": code, "usage": printed.getvalue().lstrip().startswith("usage:")}
print(json.dumps(results))
"""


def test_every_benchmark_script_answers_help_without_running():
    pytest.importorskip("torch")
    assert len(SCRIPTS) > 20
    done = subprocess.run(
        [sys.executable, "-c", HELP_ALL, *map(str, SCRIPTS)],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    wrong = {script: r for script, r in results.items() if r != {"code": 0, "usage": True}}
    assert not wrong, wrong


def test_profile_stages_names_the_known_workloads_for_an_unknown_one(capsys):
    pytest.importorskip("torch")
    sys.path.insert(0, str(BENCHMARKS))
    import profile_stages

    with pytest.raises(SystemExit) as stopped:
        profile_stages.main(["--workloads", "tiny,mlp"])
    assert stopped.value.code == 2
    assert "no workload mlp on cpu; known: tiny, demo, fast_path_encoder" in capsys.readouterr().err


def test_gpu_session_passes_the_named_workloads_to_stages(tmp_path):
    sys.path.insert(0, str(BENCHMARKS))
    import gpu_session

    named = gpu_session.commands(tmp_path, {"stages": ["vit", "mixtral"]})["stages"][0]
    default = gpu_session.commands(tmp_path, {"stages": []})["stages"][0]
    assert named[named.index("--workloads") + 1] == "vit,mixtral"
    assert default[default.index("--workloads") + 1] == "tiny,mlp,transformer_encoder"
