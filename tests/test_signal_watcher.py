"""The watcher of cli/interrupts.py wakes a main thread whose signal's handler did not run soon (the kernel handed the
signal to another thread): each signal must still reach its handler once, never twice."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import REPO
from kernelscope.interrupts import HANDLER_WAIT, ctrl_c_handled, ended_by_signals

RUN = REPO / "sample_traces" / "mlp"


def test_a_signal_a_handler_of_the_user_s_code_took_is_not_delivered_to_it_again():
    """record runs the user's code inside the command's handlers; a training script's own Ctrl-C handler (first:
    stop after this step, second: quit now) ran every 0.2 s for one Ctrl-C, as the watcher counted only its own
    handler's runs and sent the signal again, and again: once the command's handler was back, it raised."""
    calls = []
    try:
        with ended_by_signals():
            ours = signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(HANDLER_WAIT * 3)
            finally:
                signal.signal(signal.SIGINT, ours)
    except KeyboardInterrupt:
        calls.append("KeyboardInterrupt once the command's handler was back")
    assert calls == [signal.SIGINT]


def test_two_signals_that_ran_the_handler_once_raise_once(monkeypatch):
    """Two Ctrl-C the kernel handed to another thread before the main thread ran Python run its handler once (CPython
    notes a signal as a flag); the watcher took the second for one never handled and sent it again, a second
    KeyboardInterrupt after sql's prompt had dropped its line for the first (ctrl_c_handled())."""
    raised = []

    def handed_elsewhere():
        for _ in range(2):
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    with ended_by_signals():
        for wait in (10, HANDLER_WAIT * 3):  # the first ends as the watcher wakes the main thread
            try:
                if not raised:
                    threading.Thread(target=handed_elsewhere).start()
                time.sleep(wait)
            except KeyboardInterrupt:
                raised.append(ctrl_c_handled())
    assert raised == [True]


def test_the_main_thread_is_woken_once_for_a_signal_it_handled_late(monkeypatch):
    """Where the handler never catches up with the signals seen (two ran it once), the wake itself is no new signal:
    the watcher must not wake the main thread again for its own wake, every HANDLER_WAIT."""
    wakes = []
    monkeypatch.setattr("kernelscope.interrupts._woken", lambda signum, frame: wakes.append(signum))

    def handed_elsewhere():
        for _ in range(2):
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    with ended_by_signals():
        try:
            threading.Thread(target=handed_elsewhere).start()
            time.sleep(10)
        except KeyboardInterrupt:
            ctrl_c_handled()
        time.sleep(HANDLER_WAIT * 4)
    assert len(wakes) == 1


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_pending_behind_the_parent_s_mask_ends_the_command_with_one_line(signum):
    """A signal sent while the parent's mask blocked it waits through exec; entry.py's unblocking delivers it at
    once, and its handler raised before the block that turns it into one line: a traceback of _Stopped."""
    launcher = (
        "import os, signal, sys\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {1, 2, 15})\n"
        f"os.kill(os.getpid(), {int(signum)})\n"
        "os.execv(sys.executable, [sys.executable, '-c', 'from kernelscope.entry import main; main()', 'analyze', "
        f"{str(RUN)!r}])"
    )
    done = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, timeout=60)
    said = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
    assert (done.returncode, done.stderr.strip().splitlines()) == (128 + signum, [f"kernelscope: {said}"])


# Ctrl-C while DuckDB's native module initializes: its nanobind calls Python's enum there, where the signal is sent.
IN_DUCKDB_INIT = """
import enum, os, signal, sys
real = enum.EnumType.__call__
sent = []
def call(cls, *args, **kwargs):
    if "duckdb" in sys.modules and "kernelscope.interrupts" in sys.modules and not sent:
        sent.append(os.kill(os.getpid(), signal.SIGINT))
    return real(cls, *args, **kwargs)
enum.EnumType.__call__ = call
sys.argv = ["kernelscope", "sql", sys.argv[1], "SELECT 1"]
from kernelscope.entry import main
main()
"""


def test_a_signal_while_duckdb_s_native_module_initializes_is_one_line():
    """A KeyboardInterrupt raised inside DuckDB's module initialization made nanobind abort the process ('Critical
    nanobind error', a traceback, SIGABRT): the signal_sweep's SIGINT 0.58 s into `sql -o`, once in 150."""
    done = subprocess.run([sys.executable, "-c", IN_DUCKDB_INIT, str(RUN)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr.strip().splitlines()) == (130, ["kernelscope: interrupted"])


# A signal whose raise some code swallowed (a bare except, a C function that clears errors) while the CLI imports.
SWALLOWED = """
import os, signal, sys, time
import click
real, signum = click.Group.make_context, int(sys.argv[3])
def swallowing(self, *args, **kwargs):
    try:
        os.kill(os.getpid(), signum)
        time.sleep(1)
    except BaseException:
        pass
    return real(self, *args, **kwargs)
click.Group.make_context = swallowing
sys.argv = ["kernelscope", "analyze", sys.argv[1], "-o", sys.argv[2]]
from kernelscope.entry import main
main()
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_whose_raise_was_swallowed_before_the_command_ran_still_ends_it(signum, tmp_path):
    """signal_sweep's SIGINT ~0.1 s into `sql -o`: the entry's handler ran (the process caught the signal) but its
    raise never ended the command, which wrote its output and exited 0."""
    out = tmp_path / "k.csv"
    args = [sys.executable, "-c", SWALLOWED, str(RUN), str(out), str(int(signum))]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    said = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
    assert (done.returncode, done.stderr.strip().splitlines(), out.exists()) == (
        128 + signum,
        [f"kernelscope: {said}"],
        False,
    )
