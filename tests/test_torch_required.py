"""tests/torch_required.py: under KERNELSCOPE_REQUIRE_TORCH=1 a test that needs torch fails when torch is missing,
at module level and inside a test; without it, such tests are skipped."""

import os
import subprocess
import sys

import pytest
from conftest import TESTS

NEEDS_TORCH = """
import pytest
torch = pytest.importorskip("torch")

def test_with_torch():
    pass
"""
NEEDS_TORCH_INSIDE = """
import pytest

def test_inside():
    pytest.importorskip("torch")

def test_without_torch():
    pass
"""


@pytest.mark.parametrize("required", [True, False])
def test_a_missing_torch_fails_where_torch_is_required(required, tmp_path):
    (tmp_path / "test_module_level.py").write_text(NEEDS_TORCH)
    (tmp_path / "test_in_a_test.py").write_text(NEEDS_TORCH_INSIDE)
    (tmp_path / "torch").mkdir()  # shadows the real torch: importing it fails as when it is not installed
    (tmp_path / "torch" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\")\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(TESTS)])}
    env.pop("KERNELSCOPE_REQUIRE_TORCH", None)
    env["COLUMNS"] = "400"  # the short summary's lines whole, not cut to a terminal's width
    if required:
        env["KERNELSCOPE_REQUIRE_TORCH"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "torch_required", "-p", "no:cacheprovider", "-q", "-rfEs"]
        + ["--continue-on-collection-errors", tmp_path],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    summary = done.stdout.strip().splitlines()[-1]
    if required:
        assert done.returncode == 1, done.stdout
        assert "1 failed, 1 passed, 1 error" in summary, done.stdout
        summary_lines = [line for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
        assert len(summary_lines) == 2, done.stdout  # the test that needs torch, and the module that imports it
        assert all("torch is required here (KERNELSCOPE_REQUIRE_TORCH=1)" in line for line in summary_lines)
    else:
        assert done.returncode == 0 and "1 passed, 2 skipped" in summary, done.stdout
