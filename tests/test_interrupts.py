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
    "analyze, attributing": ("rank_parts", "validate_events", "analyze"),
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
    args = [command, RUN] + (["--to", archive] if command == "archive" else [])
    _signalled(STALLED.format(module=module, function=function), args, signum, "stalled", scratch)
    assert os.listdir(scratch) == []
    if command == "archive":
        assert not archive.exists(), "the archive its first add made goes with the add: no archive of no run is left"


# Runs the CLI with the trace's validation made to run a query that never ends once it has done its work.
IN_A_QUERY = """
import sys
import kernelscope.analyzer.rank_parts as target
real = target.validate_events
def in_a_query(con, *args, **kwargs):
    real(con, *args, **kwargs)
    print("stalled", flush=True)
    con.execute("SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 3").fetchall()
target.validate_events = in_a_query
from kernelscope.cli import main
main(sys.argv[1:], prog_name="kernelscope")
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_duckdb_query_ends_the_command_like_any_other(signum, tmp_path):
    """DuckDB stops a query on a signal and raises its own RuntimeError ("Query interrupted") in place of the
    KeyboardInterrupt or Interrupted: the command still says it was interrupted, exits 128 + the signal and leaves
    nothing, and a second Ctrl-C during the cleanup is ignored."""
    scratch = tmp_path / "tmp"
    _signalled(IN_A_QUERY, ["report", RUN, "-o", tmp_path / "r.html"], signum, "stalled", scratch, twice=True)
    assert os.listdir(scratch) == [] and sorted(os.listdir(tmp_path)) == ["tmp"]


# Runs the command's entry point with the import of the CLI made to wait, as a slow import of pandas would.
IMPORTING = """
import importlib.abc, sys, time
class Slow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "kernelscope.cli":
            print("importing", flush=True)
            time.sleep(120)
sys.meta_path.insert(0, Slow())
sys.argv = ["kernelscope", "analyze", sys.argv[1]]
from kernelscope.entry import main
main()
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_cli_imports_ends_the_command_with_one_line(signum):
    """The half second of imports before the CLI handles signals: one line and 128 + the signal, no traceback."""
    _signalled(IMPORTING, [RUN], signum, "importing")


PARSING = """
import sys, time
import click
real = click.Group.make_context
def slow(self, *args, **kwargs):
    print("parsing", flush=True)
    time.sleep(120)
    return real(self, *args, **kwargs)
click.Group.make_context = slow
sys.argv = ["kernelscope", "analyze", sys.argv[1]]
from kernelscope.entry import main
main()
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_after_the_imports_and_before_the_command_runs_ends_it_with_one_line(signum):
    """Between the imports and the command's own handlers (its arguments parsed), SIGTERM's default action ended
    the process with no line at all."""
    _signalled(PARSING, [RUN], signum, "parsing")


def test_the_command_starts_at_the_entry_point():
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"kernelscope": "kernelscope.entry:main"}


def _signalled(script: str, args: list, signum: int, cue: str, scratch=None, twice: bool = False) -> None:
    """Run ``script`` with ``args``, send it ``signum`` (``twice``: a second at once) when it prints ``cue``; it must
    end with the one line of that signal and exit 128 + it. ``scratch``: its TMPDIR, not empty when signalled."""
    env = os.environ
    if scratch is not None:
        scratch.mkdir()
        env = {**env, "TMPDIR": str(scratch)}
    child = subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout.readline() == cue + "\n", child.stderr.read()
        assert scratch is None or os.listdir(scratch), "the command has its scratch or spill folder when signalled"
        for _ in range(2 if twice else 1):
            child.send_signal(signum)
        _, errors = child.communicate(timeout=60)
    finally:
        child.kill()
    said = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"  # Ctrl-C's
    assert (child.returncode, errors.strip().splitlines()) == (128 + signum, [f"kernelscope: {said}"]), errors
