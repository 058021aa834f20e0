"""SIGTERM, SIGHUP and Ctrl-C end a command like an error (cli/interrupts.py): the command is stopped at a chosen
point (a step made to wait there), signalled, and must exit 128 + the signal with one line, leaving no scratch or
spill folder in TMPDIR and, for an archive, nothing of the add."""

import os
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.analyzer import Archive, load_run
from kernelscope.analyzer.archive import run_id_of
from kernelscope.cli import main

RUN = REPO / "sample_traces" / "mlp"
MULTI = REPO / "sample_traces" / "transformer_encoder"

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


# Runs the CLI with the step that puts an output in place (publish, as {module} imported it) made to wait once its
# first output's move is done: a signal then comes after that output is whole, before the line after the move.
PUBLISHED = """
import sys, time
import {module} as target
real = target.publish
def stalled(move, source, target_path, output=True):
    real(move, source, target_path, output)
    if output:
        print("stalled", flush=True)
        time.sleep(120)
target.publish = stalled
sys.path.insert(0, ".")
from kernelscope.cli import main
main(sys.argv[1:], prog_name="kernelscope")
"""
RECORDED = (
    "import torch\nfrom torch import nn\n\ndef small():\n    return nn.Linear(4, 2), [((torch.randn(3, 4),), {})]\n"
)


@pytest.mark.parametrize(
    "command, signum",
    [("analyze", signal.SIGTERM), ("sql", signal.SIGINT), ("report", signal.SIGHUP), ("archive", signal.SIGTERM)],
)
def test_a_signal_after_the_output_is_in_place_ends_the_command_with_success(command, signum, tmp_path):
    """The output the command was asked for is whole once it is renamed into place: a signal that comes after the
    rename (before the line after it) says so in one line and exits 0, and the output is the one a command left
    alone writes."""
    out = tmp_path / {"analyze": "k.csv", "sql": "k.duckdb", "report": "r.html"}.get(command, "archive")
    module = "kernelscope.analyzer.archive_commit" if command == "archive" else "kernelscope.analyzer.atomic"
    args = ["archive", RUN, "--to", out] if command == "archive" else [command, RUN, "-o", out]
    said = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
    assert _signalled_at(PUBLISHED.format(module=module), args, signum) == (
        0,
        [f"kernelscope: {said} after {out} was complete; the output is whole"],
    )
    assert [p.name for p in tmp_path.iterdir()] == [out.name], "no temporary file left beside it"
    if command == "archive":
        assert Archive(out).run_ids() == [run_id_of(RUN)]
    elif command == "analyze":
        alone = tmp_path / "alone" / "k.csv"
        alone.parent.mkdir()
        assert CliRunner().invoke(main, ["analyze", str(RUN), "-o", str(alone)]).exit_code == 0
        assert out.read_bytes() == alone.read_bytes()


# As PUBLISHED, but the SIGTERM is handed to another thread of the process, as the kernel may hand a process's
# signal: the main thread sleeps on in its system call, which that signal did not interrupt.
ON_ANOTHER_THREAD = """
import signal, sys, threading, time
import kernelscope.analyzer.atomic as target
real = target.publish
def stalled(move, source, target_path, output=True):
    real(move, source, target_path, output)
    if output:
        def handed_here():
            time.sleep(0.3)
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        threading.Thread(target=handed_here).start()
        time.sleep(120)
target.publish = stalled
from kernelscope.cli import main
main(sys.argv[1:], prog_name="kernelscope")
"""


def test_a_signal_handed_to_another_thread_still_ends_a_main_thread_blocked_in_a_system_call(tmp_path):
    """CI saw an archive's SIGTERM unhandled for a minute: the signal landed on another thread, and the main thread,
    asleep in a system call, was not woken to run its handler (cli/interrupts.py sends it to the main thread)."""
    out = tmp_path / "k.csv"
    child = _started(ON_ANOTHER_THREAD, ["analyze", RUN, "-o", out])
    try:
        _, errors = _ended(child)
    finally:
        child.kill()
    lines = [line for line in errors.strip().splitlines() if "warning" not in line]
    said = f"kernelscope: stopped by SIGTERM after {out} was complete; the output is whole"
    assert (child.returncode, lines) == (0, [said])


def test_a_signal_after_the_run_directory_is_in_place_ends_record_with_success(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "recorded.py").write_text(RECORDED)
    out = tmp_path / "run"
    script = PUBLISHED.format(module="kernelscope.recorder.run_writer")
    args = ["record", "recorded:small", "--warmup", "1", "--out", out]
    assert _signalled_at(script, args, signal.SIGINT, cwd=tmp_path) == (
        0,
        [f"kernelscope: interrupted after {out} was complete; the output is whole"],
    )
    assert len(load_run(out).profiling_df()) > 0


# Runs the CLI with record --force made to wait once, in a step of replacing the old run (run_writer's os.rename or
# shutil.rmtree, as STEP names it) on the folder moved aside: a signal then comes inside the swap.
SWAPPING = """
import os, shutil, sys, time
real_rename, real_rmtree, waited = os.rename, shutil.rmtree, []
def wait_once():
    if not waited:
        waited.append(True)
        print("stalled", flush=True)
        time.sleep(120)
def rename(source, target):
    real_rename(source, target)
    if str(target).endswith(".old") and STEP == "moved aside":
        wait_once()
def rmtree(path, *args, **kwargs):
    if str(path).endswith(".old") and STEP == "removing the old run":
        wait_once()
    real_rmtree(path, *args, **kwargs)
os.rename, shutil.rmtree = rename, rmtree
sys.path.insert(0, ".")
from kernelscope.cli import main
main(sys.argv[1:], prog_name="kernelscope")
"""


@pytest.mark.parametrize("step", ["moved aside", "removing the old run"])
def test_a_signal_while_record_force_swaps_the_runs_leaves_one_whole_run_and_nothing_aside(step, tmp_path):
    """Ctrl-C just after record --force moved the old run aside put nothing back (the old run stayed in a hidden
    .run.<id>.old folder, and none at run); during the removal of the old run once the new one was in place, the
    old one stayed half removed. Now the first puts the old run back (exit 130), the second finishes the removal
    (the new run is whole: exit 0)."""
    torch = pytest.importorskip("torch")
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    (tmp_path / "recorded.py").write_text(RECORDED)
    out = tmp_path / "run"
    ModuleFunctionKernelProfiler().profile(torch.nn.Linear(2, 2), [((torch.randn(1, 2),), {})], out=out)
    old = (out / "manifest.json").read_bytes()
    script = SWAPPING.replace("STEP", repr(step))
    args = ["record", "recorded:small", "--warmup", "0", "--out", out, "--force"]
    code_and_lines = _signalled_at(script, args, signal.SIGINT, cwd=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["recorded.py", "run"]
    if step == "moved aside":
        assert code_and_lines == (130, ["kernelscope: interrupted"])
        assert (out / "manifest.json").read_bytes() == old, "the old run, back in place"
    else:
        assert code_and_lines == (0, [f"kernelscope: interrupted after {out} was complete; the output is whole"])
        assert (out / "manifest.json").read_bytes() != old and len(load_run(out).profiling_df()) > 0


def test_a_signal_after_one_run_of_two_is_archived_is_an_interruption(tmp_path):
    """The job of archive RUN_A RUN_B is done when both are in: a signal after the first one's commit stops the
    command (128 + the signal), the first run archived whole, the second not."""
    archive = tmp_path / "archive"
    script = PUBLISHED.format(module="kernelscope.analyzer.archive_commit")
    code_and_lines = _signalled_at(script, ["archive", RUN, MULTI, "--to", archive], signal.SIGTERM)
    assert code_and_lines == (128 + signal.SIGTERM, ["kernelscope: stopped by SIGTERM"])
    assert Archive(archive).run_ids() == [run_id_of(RUN)]


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


# Runs the CLI with the user's query of sql cued: "stalled" 3 s after the query began, while it runs.
IN_A_USER_QUERY = """
import sys, threading
import kernelscope.analyzer.user_queries as target
real = target.query_result
def cued(con, query):
    threading.Timer(3.0, lambda: print("stalled", flush=True)).start()
    return real(con, query)
target.query_result = cued
from kernelscope.cli import main
main(sys.argv[1:], prog_name="kernelscope")
"""
ENDLESS = "SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 3"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("saved", [False, True], ids=["printed", "-o FILE.duckdb"])
def test_a_signal_during_the_user_s_query_ends_it_at_once(saved, signum, tmp_path):
    """The main thread waits on the query while DuckDB's threads do its work, and looks for a signal only now and
    then; where it found one, DuckDB still waited for its threads: the command went on until the query ended (here
    never), with Ctrl-C or SIGTERM unseen, about one time in two. Now the signal interrupts the query from a thread
    (cli/interrupts.py): one line, 128 + the signal, no database and no temporary file left."""
    args = ["sql", RUN, ENDLESS] + (["-o", tmp_path / "out.duckdb"] if saved else [])
    _signalled(IN_A_USER_QUERY, args, signum, "stalled", tmp_path / "tmp")
    assert sorted(os.listdir(tmp_path)) == ["tmp"] and os.listdir(tmp_path / "tmp") == []


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


def test_signals_the_parent_blocked_still_end_the_command(tmp_path):
    """A signal mask is inherited: a command started by a thread that blocks SIGINT, SIGTERM and SIGHUP (a job
    runner's) would leave them pending, and the command running, for ever."""
    launcher = (
        "import os, signal, sys\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {2, 15, 1})\n"
        "os.execv(sys.executable, sys.argv[1:])"
    )
    for signum in (signal.SIGINT, signal.SIGTERM):
        _signalled(launcher, [sys.executable, "-c", PARSING, RUN], signum, "parsing")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_after_the_imports_and_before_the_command_runs_ends_it_with_one_line(signum):
    """Between the imports and the command's own handlers (its arguments parsed), SIGTERM's default action ended
    the process with no line at all."""
    _signalled(PARSING, [RUN], signum, "parsing")


EXITING = """
import atexit, sys, time
def slow_exit():
    print("stalled", flush=True)
    time.sleep(3)
atexit.register(slow_exit)
sys.argv = ["kernelscope", "analyze", sys.argv[1]]
from kernelscope.entry import main
main()
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_interpreter_exits_leaves_the_command_s_status(signum):
    """After the command ended, the handlers it had before were put back, the defaults: a signal during the
    interpreter's exit (its atexit handlers; seconds after a bench that imported torch) killed the process, whose
    output was whole, with that signal's status and no line. Now it is ignored: the command's status stands."""
    assert _signalled_at(EXITING, [RUN], signum) == (0, [])


def test_an_instance_whose_making_failed_is_not_closed_at_exit(monkeypatch):
    """A Ctrl-C while the analyzer imports (archive at 0.6 s) took the package from sys.modules while connection.py's
    thread made the first DuckDB instance, whose sql_text then raised KeyError: the exit handler that closes it
    printed that traceback, 23 lines after 'kernelscope: interrupted'."""
    from concurrent.futures import Future

    from kernelscope.analyzer import connection

    failed: Future = Future()
    failed.set_exception(KeyError("kernelscope.analyzer"))
    monkeypatch.setattr(connection, "_idle", None)
    monkeypatch.setattr(connection, "_making", (os.getpid(), failed))
    connection._close_instances()


def test_a_signal_while_the_connection_module_imports_is_one_line(monkeypatch):
    """The thread that interrupts the queries on a signal (cli/interrupts.py) met connection.py half imported (a
    Ctrl-C at 0.5 s of archive) and printed its AttributeError after 'kernelscope: interrupted'."""
    import threading
    import types

    from kernelscope.interrupts import Interrupted, ended_by_signals

    raised = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    monkeypatch.setitem(sys.modules, "kernelscope.analyzer.connection", types.ModuleType("half imported"))
    with pytest.raises(Interrupted), ended_by_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 1)  # the handler raises here
    assert raised == []


def test_the_command_starts_at_the_entry_point():
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"kernelscope": "kernelscope.entry:main"}


def _signalled_at(script: str, args: list, signum: int, cwd=None) -> tuple[int, list[str]]:
    """Run ``script`` with ``args`` and send it ``signum`` when it prints "stalled": its exit code and the lines of
    its stderr (warnings left out)."""
    child = _started(script, args, cwd=cwd)
    try:
        while (line := child.stdout.readline()) != "stalled\n":
            assert line, child.stderr.read()
        child.send_signal(signum)
        _, errors = _ended(child)
    finally:
        child.kill()
    return child.returncode, [line for line in errors.strip().splitlines() if "warning" not in line]


def _signalled(script: str, args: list, signum: int, cue: str, scratch=None, twice: bool = False) -> None:
    """Run ``script`` with ``args``, send it ``signum`` (``twice``: a second at once) when it prints ``cue``; it must
    end with the one line of that signal and exit 128 + it. ``scratch``: its TMPDIR, not empty when signalled."""
    env = os.environ
    if scratch is not None:
        scratch.mkdir()
        env = {**env, "TMPDIR": str(scratch)}
    child = _started(script, args, env=env)
    try:
        assert child.stdout.readline() == cue + "\n", child.stderr.read()
        assert scratch is None or os.listdir(scratch), "the command has its scratch or spill folder when signalled"
        for _ in range(2 if twice else 1):
            child.send_signal(signum)
        _, errors = _ended(child)
    finally:
        child.kill()
    said = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"  # Ctrl-C's
    assert (child.returncode, errors.strip().splitlines()) == (128 + signum, [f"kernelscope: {said}"]), errors


def _ended(child: subprocess.Popen) -> tuple[str, str]:
    """The child's output once it has ended, within a minute; else a failure that shows its signal masks and where
    it waits (CI saw a signalled child go on for a minute, once)."""
    try:
        return child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        status = open(f"/proc/{child.pid}/status").read().splitlines()
        states = [line for line in status if line.startswith(("State", "Threads", "Sig", "Shd"))]
        tasks = {
            task: open(f"/proc/{child.pid}/task/{task}/wchan").read() for task in os.listdir(f"/proc/{child.pid}/task")
        }
        pytest.fail(f"the child did not end a minute after the signal: {states}, waiting in {tasks}")


def _started(script: str, args: list, **options) -> subprocess.Popen:
    """``python -c script args…``, its stdout and stderr piped as text."""
    command = [sys.executable, "-c", script, *map(str, args)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options)


@pytest.mark.parametrize("failure", [KeyError("kernelscope.analyzer"), KeyboardInterrupt()])
def test_an_instance_whose_making_failed_is_nothing_to_close_at_exit(failure, monkeypatch):
    """Ctrl-C in the first second of `analyze` cut the analyzer's import while a thread made the DuckDB instance
    ahead (its SQL files read through the package, gone from sys.modules): the exit printed "Exception ignored in
    atexit callback" and that thread's KeyError under `kernelscope: interrupted`."""
    from concurrent.futures import Future

    from kernelscope.analyzer import connection

    failed = Future()
    failed.set_exception(failure)
    monkeypatch.setattr(connection, "_making", (os.getpid(), failed))
    connection._close_instances()  # raises nothing
    assert connection._making is None
