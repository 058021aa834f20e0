"""The ``kernelscope`` command's entry point. Importing the CLI and parsing the arguments come before any of its own
handling of signals is in place (the commands' bodies import the heavy modules, pandas, DuckDB, the analyzer and
torch, under it: --help and usage errors need none of them): a Ctrl-C, SIGTERM or SIGHUP then ends the command the
same way as later, one line and 128 + the signal, instead of a traceback or a silent death. Nothing is written yet.
Once the command has ended, signals are ignored while the interpreter exits."""

from __future__ import annotations

import signal
import sys


class _Stopped(BaseException):
    pass


noted: list[int] = []  # the signals stop() raised for: where the raise was swallowed, the command raises it again


def main() -> None:
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
