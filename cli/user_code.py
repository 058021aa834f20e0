"""What ``record`` and ``demo`` say when the user's code fails or the recorder warns: the traceback of the user's own
frames and one ``kernelscope: error:`` line (not forty lines of click and the recorder first), and the recorder's
RuntimeWarnings as ``kernelscope: warning:`` lines, as every other command prints them."""

from __future__ import annotations

import sys
import traceback
from contextlib import contextmanager
from pathlib import Path

from .loading import warnings_as_lines
from .output import diagnostic

INTERNAL = ("kernelscope", "click", "importlib", "runpy")  # the modules a failure passes through before the user's


@contextmanager
def user_code(target: str, what: str, caller: str | None = None):
    """Run the user's ``what`` (``the factory``, ``the model``): an exception raised in their code prints its
    traceback from their first frame on, then ends the command as one KernelscopeError naming ``target``. One raised
    by the call itself, in ``caller`` (``module.function``, where kernelscope calls their code: a factory or model
    given arguments it does not take), is that one line alone. Any other exception (kernelscope's own) propagates
    untouched."""
    from kernelscope.analyzer.errors import KernelscopeError

    try:
        yield
    except KernelscopeError:
        raise
    except (Exception, SystemExit) as exc:  # their sys.exit() too: it ended record with its code, nothing recorded
        theirs = _first_user_frame(exc.__traceback__)
        # a SyntaxError in their file is raised by the parser, in importlib's frames: its file, line and caret say where
        parsed = isinstance(exc, SyntaxError) and exc.filename is not None and theirs is None
        if theirs is None and not parsed and _where(_innermost(exc.__traceback__)) != caller:
            raise
        problem = f"{what} raised {type(exc).__name__}" + (f": {exc}" if str(exc) else "")
        if theirs is None and not parsed:
            raise KernelscopeError(target, problem.splitlines()[0]) from None
        for line in "".join(traceback.format_exception(type(exc), exc, theirs)).splitlines():
            diagnostic(line)  # as every line on stderr: what it quotes cannot drive the terminal
        raise KernelscopeError(target, f"{problem.splitlines()[0]} (traceback above)") from None


def _innermost(tb):
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb


def _where(tb) -> str | None:
    return None if tb is None else f"{tb.tb_frame.f_globals.get('__name__')}.{tb.tb_frame.f_code.co_name}"


def _first_user_frame(tb):
    while tb is not None:
        name = tb.tb_frame.f_globals.get("__name__") or ""
        if not any(name == internal or name.startswith(internal + ".") for internal in INTERNAL):
            return tb
        tb = tb.tb_next
    return None


def recorder_warnings():
    """The RuntimeWarnings kernelscope raises in the block (a torch.compile'd model recorded with module scopes only,
    inputs not kept: warned at profile()'s caller, the command) as ``kernelscope: warning: …`` lines after it; the
    model's own warnings as Python shows them."""
    ours = _package_folders()
    return warnings_as_lines(lambda warning: Path(warning.filename).resolve().parent in ours)


def _package_folders() -> set[Path]:
    names = ("kernelscope", "kernelscope.analyzer", "kernelscope.recorder")
    return {Path(sys.modules[n].__file__).resolve().parent for n in names if getattr(sys.modules.get(n), "__file__", 0)}
