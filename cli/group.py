"""The command group: expected failures as one line on stderr and exit 2, signals as their exit codes."""

from __future__ import annotations

import errno
import os
import signal
import sys

import click

from .interrupts import ended_by_signals, exit_code, finished_output, name, raise_swallowed
from .output import diagnostic
from .printable import shell_word

USAGE_EXIT = 2  # every usage or input error, click's own included
INTERRUPTED_EXIT = 130  # 128 + SIGINT, as shells report a command stopped by Ctrl-C


EXTRA_ARGUMENT_HINTS = {  # what a user who gave one run too many meant
    "analyze": "analyze reads one run: 'kernelscope diff A B' compares two",
    "tree": "tree reads one run: 'kernelscope diff A B' compares two",
    "diff": "diff takes two runs; two of an archive: kernelscope diff --archive {archive} ID_A ID_B",
    "report": "report takes two runs; two of an archive: kernelscope report --archive {archive} ID_A ID_B",
}
FIRST_RUN = {"diff": "run_a", "report": "run"}  # the parameter holding what such a user gave as the archive


OUT_OF_MEMORY = (
    "ran out of memory: the process could allocate no more (the machine's memory, or a limit on the process such as"
    " ulimit -v, is less than the command takes)"
)


class KernelscopeGroup(click.Group):
    """Expected failures become one line on stderr, ``kernelscope: error: …``, and exit code 2, without a
    traceback: kernelscope's own (KernelscopeError, OSError) and click's usage errors alike. Ctrl-C exits 130."""

    command_path = None  # of the command being parsed: click's parser names no command in its own errors

    def resolve_command(self, ctx, args):
        name, command, rest = super().resolve_command(ctx, args)
        self.command_path = f"{ctx.command_path} {name}"
        return name, command, rest

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        self.command_path = None
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            returned = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # a bare `kernelscope`: its help, as click shows it
            click.echo(exc.format_message(), err=True)  # the help's own lines: nothing quoted
            sys.exit(USAGE_EXIT)
        except click.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            path = ctx.command_path if ctx is not None else None
            if path is None and isinstance(exc, click.UsageError):  # the parser's own ("requires an argument")
                path = self.command_path
            hint = f" (see '{path} --help')" if path else ""
            if ctx is not None and ctx.info_name in EXTRA_ARGUMENT_HINTS and "unexpected extra argument" in str(exc):
                given = ctx.params.get(FIRST_RUN.get(ctx.info_name, ""))
                archive = shell_word(str(given)) if given is not None else "ARCHIVE"
                hint = f"; {EXTRA_ARGUMENT_HINTS[ctx.info_name].format(archive=archive)}"
            diagnostic(f"kernelscope: error: {exc.format_message()}{hint}")
            sys.exit(USAGE_EXIT)
        except (click.Abort, KeyboardInterrupt, EOFError):
            diagnostic("kernelscope: interrupted")
            sys.exit(INTERRUPTED_EXIT)
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the reader left: say nothing more
            sys.exit(0)
        sys.exit(returned if isinstance(returned, int) else 0)

    def invoke(self, ctx):
        with ended_by_signals() as received:
            try:
                raise_swallowed()
                result = super().invoke(ctx)
                sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
            except BrokenPipeError:  # the reader (head, less) stopped reading: it had what it wanted
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the last flush has nowhere to fail
                sys.exit(0)
            except BaseException as exc:
                if received and finished_output() is not None:
                    _finished_when_signalled(received[0])
                # Ctrl-C (noted, or outside the main thread's handler): the cleanup ran on the way here
                if received == [signal.SIGINT] or (isinstance(exc, KeyboardInterrupt) and not received):
                    diagnostic("kernelscope: interrupted")
                    sys.exit(INTERRUPTED_EXIT)
                if received:  # whatever the signal turned into on its way out
                    diagnostic(f"kernelscope: stopped by {name(received[0])}")
                    sys.exit(exit_code(received[0]))
                # not imported (--help, a usage error: the analyzer's ~0.4 s of imports spared), none was raised
                errors = sys.modules.get("kernelscope.analyzer.errors")
                if errors is not None and isinstance(exc, errors.KernelscopeError):
                    diagnostic(f"kernelscope: error: {exc}")
                    sys.exit(exc.exit_code)
                if isinstance(exc, MemoryError):  # past a load, which names its trace (analyzer/errors.py)
                    diagnostic(f"kernelscope: error: {OUT_OF_MEMORY}")
                    sys.exit(2)
                if isinstance(exc, OSError):  # a full disk or a vanished directory while writing: not a bug
                    where = f"{exc.filename}: " if exc.filename else ""
                    diagnostic(f"kernelscope: error: {where}{exc.strerror or exc}")
                    sys.exit(2)
                raise
            if received and finished_output() is not None:
                _finished_when_signalled(received[0])
            if received:
                sys.exit(exit_code(received[0]))
            return result


def _finished_when_signalled(signum: int) -> None:
    """Exit 0 with one line: the signal came after the command had put its output in place (cli/interrupts.py)."""
    what = "interrupted" if signum == signal.SIGINT else f"stopped by {name(signum)}"
    diagnostic(f"kernelscope: {what} after {finished_output()} was complete; the output is whole")
    sys.exit(0)
