"""What a query-like command reads: a run directory, a job directory of ranks, a trace, or an archive
(all its runs, or one of them with ``--run``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import click

from .numbers import RANK
from .output import diagnostic
from .printable import shell_word
from .utf8_text import UTF8_TEXT


def _not_empty(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value:
        from kernelscope.analyzer.errors import KernelscopeError

        raise KernelscopeError(None, f"{param.opts[0]} must not be empty (leave it out for the run's own prefix)")
    return value


def prefix_options(command):
    command = click.option(
        "--function-prefix",
        type=UTF8_TEXT,
        default=None,
        callback=_not_empty,
        help="Scope name prefix of functional calls (default: the run's, or 'ks.fn:').",
    )(command)
    return click.option(
        "--module-prefix",
        type=UTF8_TEXT,
        default=None,
        callback=_not_empty,
        help="Scope name prefix of modules (default: the run's, or 'ks.module:'); "
        "for aitune traces use 'ait_nn_module:'.",
    )(command)


def rank_option(command=None, *, default: str = "all, merged"):
    """--rank, the same option in every command that reads one rank of a job; ``default`` says what it does without."""
    help_text = f"Only this rank of a job of ranks (default: {default})."
    option = click.option("--rank", type=RANK, default=None, help=help_text)
    return option if command is None else option(command)


def check_rank(where: str, loaded, rank: int | None) -> None:
    """A --rank that ``loaded`` does not hold is a usage error, in the same words for every command."""
    from kernelscope.analyzer.ranks import UnknownRank

    if rank is not None and rank not in loaded.ranks:
        raise click.BadParameter(str(UnknownRank(where, rank, loaded.ranks)), param_hint="--rank")


def run_option(command):
    return click.option(
        "--run",
        "run_ref",
        metavar="ID",
        type=UTF8_TEXT,
        default=None,
        help="With an archive: the archived run (its id, a unique prefix of it, or its name).",
    )(command)


def load(path: str, module_prefix: str | None, function_prefix: str | None, run_ref: str | None = None, **kwargs):
    """A Run; an Archive when ``path`` is one and no ``run_ref`` is given."""
    from kernelscope.analyzer import load_run
    from kernelscope.analyzer.archive import Archive, is_archive

    if is_archive(path):
        archive = Archive(path)
        return archive if run_ref is None else archive.run(run_ref)
    if run_ref is not None:
        raise no_archive(path, "--run")
    try:
        with in_run_directory(path), warnings_as_lines():
            loaded = load_run(path, module_prefix, function_prefix, progress=True, **kwargs)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    run_dir = _run_directory_holding(path)
    if run_dir is not None:  # the run's trace, read as a bare one: no calls counted, no input signatures
        diagnostic(
            f"kernelscope: note: {path} is the trace of the run directory {run_dir}, read without its samples "
            f"(calls, input signatures): give {run_dir} for them"
        )
    return loaded


def _run_directory_holding(path: str) -> str | None:
    """The run directory ``path`` is a file of (its folder holds manifest.json), else None."""
    file = Path(path)
    if not file.is_file() or not (file.parent / "manifest.json").is_file():
        return None
    return shell_word(str(file.parent))


@contextmanager
def in_run_directory(path: str):
    """A file of a run directory given where the run is expected (its manifest.json, samples.json: not a trace; its
    trace to bench): the error also says to give the run directory."""
    from kernelscope.analyzer.errors import KernelscopeError

    try:
        yield
    except KernelscopeError as exc:
        run_dir = _run_directory_holding(path) if exc.path == path else None
        if run_dir is None:
            raise
        raise type(exc)(
            exc.path, f"{exc.problem}; it is a file of the run directory {run_dir}: give {run_dir}"
        ) from None


DIFF_WARNING = "kernelscope diff: "  # how analyzer/diff.py begins its warnings


@contextmanager
def warnings_as_lines(ours: Callable[[warnings.WarningMessage], bool] = lambda warning: True):
    """kernelscope's RuntimeWarnings in the block (the files or ranks a load leaves out; ``ours`` tells them from
    others) and analyzer.diff's UserWarnings (runs of other devices or dtypes compared) as the CLI's one line each,
    ``kernelscope: warning: …``, after it; any other warning as Python shows it, once per place."""
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            warnings.filterwarnings("always", message=DIFF_WARNING, category=UserWarning)
            yield
    finally:
        shown = set()
        for warning in caught:
            message = str(warning.message)
            if issubclass(warning.category, RuntimeWarning) and ours(warning) or message.startswith(DIFF_WARNING):
                diagnostic(f"kernelscope: warning: {message.removeprefix('kernelscope: ').removeprefix(DIFF_WARNING)}")
                continue
            where = (str(warning.message), warning.category, warning.filename, warning.lineno)
            if where not in shown:  # as Python's default filter shows them
                shown.add(where)
                warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)


def load_run_of(
    path: str,
    module_prefix: str | None,
    function_prefix: str | None,
    run_ref: str | None = None,
    *,
    pick: str = "pick one of its runs with --run ID",
    archive_option: str = "--run",
):
    """A Run (never a whole archive: ``pick`` says how the command names one of its runs, ``{archive}`` in it the
    archive's path as a shell takes it). ``archive_option``: the option by which the user named ``path`` an archive
    (--archive) or ``run_ref`` a run of one (--run)."""
    from kernelscope.analyzer.archive import is_archive

    if run_ref is not None and not is_archive(path):
        raise no_archive(path, archive_option)
    loaded = load(path, module_prefix, function_prefix, run_ref)
    if not hasattr(loaded, "profiling_df"):
        loaded.close()
        typed = shell_word(path)
        pick = pick.format(archive=typed)
        raise click.UsageError(f"{path} is an archive: {pick} (kernelscope runs {typed} lists them)")
    return loaded


def no_archive(path: str, option: str) -> click.UsageError:
    """The error for ``path`` given as an archive (``--archive``) or as the archive of a ``--run``, and none."""
    what = "an archive" if option == "--archive" else "a run of an archive"
    state = "is not one" if Path(path).exists() else "does not exist"
    return click.UsageError(f"{option} names {what}, and {path} {state}")
