"""The ``kernelscope`` command's entry point. Importing the CLI and parsing the arguments come before any of its own
handling of signals is in place (the commands' bodies import the heavy modules, pandas, DuckDB, the analyzer and
torch, under it: --help and usage errors need none of them): a Ctrl-C, SIGTERM or SIGHUP then ends the command the
same way as later, one line and 128 + the signal, instead of a traceback or a silent death. Nothing is written yet.
Once the command has ended, signals are ignored while the interpreter exits."""

from __future__ import annotations

import errno
import io
import os
import signal
import sys


class _Stopped(BaseException):
    pass


noted: list[int] = []  # the signals stop() raised for: where the raise was swallowed, the command raises it again


class _ClosedStream(io.TextIOBase):
    """sys.stdin or sys.stdout of a process started with that descriptor closed (Python's None there): a command that
    reads or writes it fails as an OSError naming the stream (cli/group.py's one line, exit 2), not AttributeError."""

    def __init__(self, name: str) -> None:
        self.stream = name

    def isatty(self) -> bool:
        return False

    def _refuse(self, *args, **kwargs):
        raise OSError(errno.EBADF, "is closed; redirect it (to a file or /dev/null) instead of closing it", self.stream)

    read = readline = write = fileno = _refuse


def keep_standard_streams() -> None:
    """A closed descriptor 0, 1 or 2 held open on /dev/null (the next file the process opens would take it, and a
    library's own prints to stdout land in it), a closed sys.stdin or sys.stdout a _ClosedStream, and an open stdout
    written through a _StdoutFile."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.dup2(held := os.open(os.devnull, os.O_RDWR), fd)  # dup2: the lowest free descriptor may be another
            if held != fd:
                os.close(held)
    if sys.stdin is None:
        sys.stdin = _ClosedStream("standard input")
    if sys.stdout is None:
        sys.stdout = _ClosedStream("standard output")
    elif isinstance(sys.stdout, io.TextIOWrapper) and sys.stdout.fileno() == 1:
        sys.stdout.flush()  # empty at the start: nothing is lost
        sys.stdout = io.TextIOWrapper(
            io.BufferedWriter(_StdoutFile(1, "w", closefd=False)),
            encoding=sys.stdout.encoding,
            errors=sys.stdout.errors,
            line_buffering=sys.stdout.line_buffering,
            write_through=sys.stdout.write_through,
        )


class _StdoutFile(io.FileIO):
    """Descriptor 1, whose write errors name it: a full disk or /dev/full as stdout is then 'standard output: No
    space left on device' (cli/group.py's line), where the OSError of a descriptor names no file."""

    def write(self, data):
        try:
            return super().write(data)
        except OSError as exc:
            if exc.filename is not None:
                raise
            # what stays buffered goes nowhere: the interpreter's last flush would fail again, in a traceback
            os.dup2(devnull := os.open(os.devnull, os.O_WRONLY), self.fileno())
            os.close(devnull)
            raise OSError(exc.errno, exc.strerror, "standard output") from None  # BrokenPipeError stays one


def main() -> None:
    keep_standard_streams()

    def stop(signum: int, frame) -> None:
        noted.append(signum)
        raise _Stopped(signum)

    signums = [getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)]
    previous = {}
    try:
        try:
            # inside the block that says the signal: one the parent's mask held back comes at the unblocking
            for signum in signums:
                previous[signum] = signal.signal(signum, stop)
            if hasattr(signal, "pthread_sigmask"):  # a mask is inherited: a parent's thread that blocked them held them
                signal.pthread_sigmask(signal.SIG_UNBLOCK, signums)
            # A run's DuckDB instance is made on a thread while the analyzer imports (analyzer/connection.py), in the
            # body of a command that loads one: the CLI's own imports (~40 ms) are too short to hide more of it.
            from .cli import main as command

            # kept while the arguments are parsed too: the command's own handlers (cli/interrupts.py) take over
            # only once it runs, and put this one back after it
            command()
        finally:
            # the command has ended and its exit status is settled: a signal from here on is ignored, as the default
            # action would end the interpreter's exit (its atexit handlers, spill folders removed, threads joined,
            # seconds where torch was imported) with the signal's status, the output whole and its cleanup undone
            for signum in previous:
                signal.signal(signum, signal.SIG_IGN)
    except _Stopped as stopped:
        (signum,) = stopped.args
        said = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
        sys.stderr.write(f"kernelscope: {said}\n")
        sys.exit(128 + signum)
