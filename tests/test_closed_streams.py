"""A command started with its standard input or output closed (a shell's `>&-`, `<&-`, a daemon's child): one line
naming the stream and exit 2 where the command needs it, and no file the command opens takes its descriptor (where a
library's own prints to fd 1 would land in the output file). Processes of their own: the streams are the process's."""

import os
import subprocess
import sys

import pytest
from conftest import REPO

RUN = REPO / "sample_traces" / "mlp"


def _kernelscope(*args: str, closed: int, cwd=None) -> subprocess.CompletedProcess:
    other = subprocess.DEVNULL if closed == 0 else None
    return subprocess.run(
        [sys.executable, "-m", "kernelscope", *args],
        preexec_fn=lambda: os.close(closed),
        stdin=other,
        stdout=subprocess.PIPE if closed != 1 else None,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "closed", "stream"),
    [(["analyze", str(RUN)], 1, "standard output"), (["sql", str(RUN)], 0, "standard input")],
    ids=["analyze without stdout", "sql's prompt without stdin"],
)
def test_a_closed_stream_the_command_needs_is_one_line_and_exit_2(args, closed, stream):
    done = _kernelscope(*args, closed=closed)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"kernelscope: error: {stream}: is closed") and done.stderr.count("\n") == 1


def test_no_file_opened_takes_a_closed_standard_descriptor():
    """A library's own write to fd 1 (DuckDB's, torch's) must not land in a file the command opened."""
    opened = "import os, sys; from kernelscope.entry import keep_standard_streams; keep_standard_streams(); "
    opened += "sys.stderr.write(str(os.open(os.devnull, os.O_RDONLY)))"
    done = subprocess.run(
        [sys.executable, "-c", opened], preexec_fn=lambda: os.close(1), stderr=subprocess.PIPE, text=True, timeout=60
    )
    assert done.returncode == 0 and int(done.stderr) > 2, done.stderr


def test_an_output_file_needs_no_stdout(tmp_path):
    done = _kernelscope("analyze", str(RUN), "--kernels", "--csv", "-o", "out.csv", closed=1, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert (tmp_path / "out.csv").read_text().count("\n") == 7  # the header and mlp's 6 kernels


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_stdout_is_named_in_its_line():
    """A write error of stdout carries no file name: the line said only 'No space left on device'."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "kernelscope", "analyze", str(RUN)],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 2 and done.stderr == "kernelscope: error: standard output: No space left on device\n"


def test_record_without_stdout_is_refused_before_the_model_runs(tmp_path):
    """Its summary goes to stdout: refused only then, the run was written and the command still failed."""
    pytest.importorskip("torch")
    done = _kernelscope("demo", "--device", "cpu", "--out", str(tmp_path / "run"), closed=1)
    assert done.returncode == 2 and done.stderr.startswith("kernelscope: error: standard output: is closed")
    assert not (tmp_path / "run").exists()
