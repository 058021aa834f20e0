"""SIGTERM, SIGHUP and Ctrl-C end a command the way an error does: every ``finally`` and ``with`` on the way out runs,
so scratch and spill folders, an archive's staging and temporary files are removed, and the process exits with
128 + the signal's number (143, 129; Ctrl-C: 130). Without this, their default action ends the process at once
and leaves all of that behind. A second signal while the first one's cleanup runs is ignored; SIGKILL is not
(a later ``kernelscope archive`` removes what an add killed that way left).

A signal that comes once the command's output (the file, run directory or archived run it was asked for) is in
place stops what was left (printing, cleaning up) but not the job, which is done: the command says the output is
complete and exits 0, as a shell script that goes on to read the output should take it (finishing()).

Ctrl-C is noted too, not only raised: DuckDB turns the KeyboardInterrupt raised while a query runs into its own
``RuntimeError: Query interrupted``, which only the note tells from a bug."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
_received: list[int] = []  # the signals of the running command (one command runs at a time, in the main thread)
_finishing: list[tuple[int, str | os.PathLike]] = []  # (publications() when the last step began, its output)


class Interrupted(BaseException):
    """Raised in the main thread by SIGTERM or SIGHUP: not an Exception, so no handler of errors takes it for one."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def ended_by_signals() -> Iterator[list[int]]:
    """Turn SIGTERM and SIGHUP into Interrupted, and Ctrl-C into KeyboardInterrupt, while the block runs; yields the
    list of the signals received (a query DuckDB was running when one came is interrupted, and its error may hide
    the Interrupted or KeyboardInterrupt)."""
    received = _received
    received.clear()
    _finishing.clear()
    _held.clear()
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def interrupt(signum: int, frame) -> None:
        if received:  # the first one's cleanup is running: let it finish
            return
        received.append(signum)
        if _deferring:  # raised once the block ends (signals_deferred)
            _held.append(signum)
            return
        _raise(signum)

    counts = [0, 0]  # the signals whose handler ran, and those of them it raised for (the first; ignored: later)

    def counted(signum: int, frame) -> None:
        counts[0] += 1
        counts[1] += not received
        interrupt(signum, frame)

    previous = {signum: signal.signal(signum, counted) for signum in (*SIGNALS, signal.SIGINT)}
    try:
        with _queries_interrupted(counts):
            yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        received.clear()


def _raise(signum: int) -> None:
    raise KeyboardInterrupt if signum == signal.SIGINT else Interrupted(signum)


_deferring: list[bool] = []  # one for each signals_deferred block running
_held: list[int] = []  # the signal whose raise a block held back


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold back the raise of a signal that comes while the block runs until it ends (the signal is noted at once): an
    exception raised inside a native module's initialization (DuckDB's, whose nanobind calls Python's enum there)
    aborted the process ('Critical nanobind error', a traceback, SIGABRT) instead of ending the command."""
    _deferring.append(True)
    try:
        yield
    finally:
        _deferring.pop()
    if not _deferring and _held:
        _raise(_held.pop())


def raise_swallowed() -> None:
    """Raise, as the command's handler would, a signal that the entry's handler raised for and that did not end the
    command: code on the way (a bare except, a C function that clears errors) swallowed the raise, and the command
    went on to write its output and exit 0 (called first thing in ended_by_signals' block)."""
    for signum in getattr(sys.modules.get("kernelscope.entry"), "noted", [])[:1]:
        signal.getsignal(signum)(signum, None)


HANDLER_WAIT = 0.2  # seconds a signal's handler may take to run before the queries are interrupted


@contextlib.contextmanager
def _queries_interrupted(counts: list[int]) -> Iterator[None]:
    """Interrupt DuckDB's queries (connection.interrupt_queries) where a signal's Python handler raised, or did not
    run within HANDLER_WAIT. A query the main thread waits on while DuckDB's threads do its work looks for a signal
    only now and then, and where it finds one (the handler runs and raises) it may still wait for those threads to
    end their work: SIGTERM or Ctrl-C during a long query of ``kernelscope sql`` went unseen until the query ended,
    even with the handler run. The signals are seen on a thread, through the wakeup file descriptor CPython writes
    each one's number to; the interrupted query's error is followed by the handler's, which ends the command as it
    would have. A signal the handler ignores (a second one, while the first one's cleanup runs) interrupts nothing.

    The kernel may hand a process's signal to any of its threads (a DuckDB worker, this watcher): one that lands
    elsewhere leaves a main thread blocked in a system call (a sleep, a read, a wait on a lock) blocked, its handler
    not run. Where the handler did not run within HANDLER_WAIT, the main thread is woken by WAKE, whose handler does
    nothing: the call ends, and the handlers of the signals already noted run, each once. (Sending the signal itself
    again ran a handler twice where two signals had run it once, and every 0.2 s where the handler was the user's
    code's, which this one does not count.)"""
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        before = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:  # not the main thread of the main interpreter
        os.close(read)
        os.close(write)
        yield
        return
    woken = WAKE is not None and hasattr(signal, "pthread_kill")
    wake_handler = signal.signal(WAKE, _woken) if woken else None
    main_thread = threading.main_thread().ident
    ours = signal.getsignal(signal.SIGINT)  # counted, ended_by_signals' handler of every signal it turns

    def watch() -> None:
        seen = raised = 0
        try:
            while True:
                try:
                    data = os.read(read, 64)
                except OSError:
                    return
                if not data:
                    return
                signums = [signum for signum in data if signum != WAKE]
                if not signums:  # only the wakes this thread sent: waking for them would wake again, every 0.2 s
                    continue
                counted_here = sum(signal.getsignal(signum) is ours for signum in signums)
                seen += counted_here
                deadline = time.monotonic() + HANDLER_WAIT
                while counts[0] < seen and time.monotonic() < deadline:
                    time.sleep(0.01)
                unhandled = counts[0] < seen
                # another handler (the user's code's) is not counted: whether it ran is unknown, and a wake harmless
                if woken and (unhandled or len(signums) > counted_here):
                    signal.pthread_kill(main_thread, WAKE)
                if unhandled or counts[1] > raised:
                    # none made where the module is not imported, or not yet whole (a signal during its import)
                    connections = sys.modules.get("kernelscope.analyzer.connection")
                    interrupt_queries = getattr(connections, "interrupt_queries", None)
                    if interrupt_queries is not None:
                        interrupt_queries()
                raised = counts[1]
        finally:
            os.close(read)  # here: the main thread, done waiting for a late watcher, would let it read a reused number

    watcher = threading.Thread(target=watch, name="kernelscope-signals", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(before)
        os.close(write)  # the watcher reads the end of the pipe and returns
        watcher.join(1)
        if woken:
            signal.signal(WAKE, wake_handler)


# wakes the main thread: ignored by default, so one that comes after its handler is put back does nothing
WAKE = getattr(signal, "SIGURG", None)


def _woken(signum: int, frame) -> None:
    """WAKE's handler: the main thread's system call ended, and the signals noted meanwhile have run their handlers."""


def finishing(output: str | os.PathLike) -> None:
    """Called by a command before the step that puts in place ``output``, the file, run or archive it was asked
    for: once that step has put it there, the command's job is done, and a signal that comes later (while the
    command prints, removes an old run it replaced, closes its connection) no longer makes it fail
    (finished_output)."""
    from kernelscope.analyzer.atomic import publications

    _finishing[:] = [(publications(), output)]


def finished_output() -> str | os.PathLike | None:
    """The output named by finishing() where the step after it put something in place that is there still (told
    from the file system: the signal may have come between the rename and the line after it), else None."""
    from kernelscope.analyzer.atomic import published_since

    return next((output for mark, output in _finishing if published_since(mark)), None)


def ctrl_c_handled() -> bool:
    """Whether a Ctrl-C was noted, forgetting it: a command that goes on after one (sql's prompt drops the line or
    statement) calls this, so that the next Ctrl-C is noted again."""
    handled = _received == [signal.SIGINT]
    if handled:
        _received.clear()
    return handled


def exit_code(signum: int) -> int:
    return 128 + signum


def name(signum: int) -> str:
    return signal.Signals(signum).name
