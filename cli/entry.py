"""The ``kernelscope`` command's entry point. Importing the CLI (click, pandas, DuckDB) takes about half a second
before any of its own handling of signals is in place, and parsing the arguments comes before it too: a Ctrl-C,
SIGTERM or SIGHUP then ends the command the same way as later, one line and 128 + the signal, instead of a traceback
or a silent death. Nothing is written yet."""

from __future__ import annotations

import signal
import sys

# The commands that load a run into the analyzer's DuckDB instance: theirs is made on a thread while the CLI imports
# (~30 ms less of `analyze`, whose imports take ~0.4 s); any other command, or a guess wrong, only makes it unused.
_LOADING_COMMANDS = frozenset({"analyze", "sql", "tree", "report", "diff", "demo"})


class _Stopped(BaseException):
    pass


def main() -> None:
    def stop(signum: int, frame) -> None:
        raise _Stopped(signum)

    signums = [getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)]
    previous = {signum: signal.signal(signum, stop) for signum in signums}
    try:
        try:
            if len(sys.argv) > 1 and sys.argv[1] in _LOADING_COMMANDS:
                from kernelscope.analyzer.connection import prepare

                prepare()
            from .cli import main as command

            # kept while the arguments are parsed too: the command's own handlers (cli/interrupts.py) take over
            # only once it runs, and put this one back after it
            command()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    except _Stopped as stopped:
        (signum,) = stopped.args
        said = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
        sys.stderr.write(f"kernelscope: {said}\n")
        sys.exit(128 + signum)
