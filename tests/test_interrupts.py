"""SIGTERM, SIGHUP and Ctrl-C end a command like an error (cli/interrupts.py): the command is stopped at a chosen
point (a step made to wait there), signalled, and must exit 128 + the signal with one line, leaving no scratch or
spill folder in TMPDIR and, for an archive, nothing of the add."""

import os
import signal
import subprocess
import sys

import pytest
from conftest import REPO

RUN = REPO / "sample_traces" / "mlp"

# Runs the CLI with one analyzer function made to wait, after doing its work, until the process is signalled.
STALLED = """
import sys, time
import kernelscope.analyzer.{module} as target
real = target.{function}
def stalled(*args, **kwargs):
    result = real(*args, **kwargs)
    print("stalled", flush=True)
    time.sleep(120)
    return result
target.{function} = stalled
from kernelscope.cli import main
main(sys.argv[1:], prog_name="kernelscope")
"""

CASES = {  # where the command waits: (module, function, command)
    "analyze, reading the trace": ("ingest", "split_event_array", "analyze"),
    "analyze, attributing": ("run", "validate_events", "analyze"),
    "archive, between its renames": ("archive_commit", "_rename_into", "archive"),
}


@pytest.mark.parametrize(
    "case, signum",
    [
        ("analyze, reading the trace", signal.SIGTERM),
        ("analyze, reading the trace", signal.SIGINT),
        ("analyze, attributing", signal.SIGHUP),
        ("archive, between its renames", signal.SIGTERM),
    ],
)
def test_a_signal_removes_the_scratch_and_exits_128_plus_its_number(case, signum, tmp_path):
    module, function, command = CASES[case]
    scratch, archive = tmp_path / "tmp", tmp_path / "archive"
    scratch.mkdir()
    args = [command, RUN] + (["--to", archive] if command == "archive" else [])
    child = subprocess.Popen(
        [sys.executable, "-c", STALLED.format(module=module, function=function), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    try:
        assert child.stdout.readline() == "stalled\n", child.stderr.read()
        assert os.listdir(scratch), "the command has its scratch or spill folder when it is signalled"
        child.send_signal(signum)
        _, errors = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 128 + signum, errors
    said = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"  # Ctrl-C's
    assert errors.strip().splitlines() == [f"kernelscope: {said}"]
    assert os.listdir(scratch) == []
    if command == "archive":
        assert sorted(p.name for p in archive.iterdir()) == ["events", "kernelscope-archive.json"]
        assert list((archive / "events").rglob("*.parquet")) == [], "the published file of the stopped add is gone"
