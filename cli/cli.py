"""The ``kernelscope`` command: record (demo, record) on a torch machine, analyze (analyze, sql) anywhere."""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from .archive_commands import archive, runs
from .bench_command import bench
from .choices import BY_COLUMN
from .diff_command import diff
from .group import KernelscopeGroup
from .interrupts import finishing
from .loading import check_rank, load_run_of, prefix_options, rank_option, run_option
from .numbers import WARMUP_PASSES
from .output import TERMINAL, Output, diagnostic, emit
from .output_options import output_options
from .paths import UserPath
from .printable import printable, shell_word
from .report_command import report
from .rows import (
    FULL_NAMES,
    SUMMARY_ROWS,
    TOP_K,
    first_rows,
    kernel_table,
    name_the_root,
    note_rows_left_out,
    print_footer,
    rows_to_show,
    run_label,
    shorten_kernel_names,
)
from .sql_command import sql
from .tree_command import tree
from .user_code import recorder_warnings, user_code
from .utf8_text import UTF8_TEXT

TORCH_HINT = "this command records and needs torch: pip install 'kernelscope[record]'"
FORCE_RUN = click.option("--force", is_flag=True, help="Replace the run directory if it exists.")
GROUPS = {"op": "operators", "module_name": "modules", "kernel": "kernels", "call_op": "call operators"}


@click.group(cls=KernelscopeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kernelscope")
def main() -> None:
    """Which torch.nn.functional call, inside which nn.Module, launched every GPU kernel.

    \b
    Start here:
      kernelscope demo                  # record a small model, see its time
      kernelscope record mymodels:make  # yours: def make(): return model, samples
      kernelscope analyze RUN           # then tree, report, sql, diff, bench

    kernelscope COMMAND --help shows a command's options and examples; README.md and docs/ say more.
    """


def _default_run_dir(stem: str) -> Path:
    """./kernelscope-<stem>-<time>; in a torch.distributed job every rank takes rank 0's time, so all ranks
    name the same job directory (profile() then writes each rank to its rank-<N>/ inside)."""
    return Path(f"kernelscope-{stem}-{_agreed_across_ranks(f'{_dt.datetime.now():%Y%m%d-%H%M%S}')}")


def _agreed_across_ranks(value: str) -> str:
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _import_recorder():
    from kernelscope.analyzer.errors import KernelscopeError

    try:
        return importlib.import_module("kernelscope.recorder")
    except ImportError as exc:
        if getattr(exc, "name", None) == "torch":
            raise KernelscopeError(None, TORCH_HINT) from None
        raise


@main.command(short_help="Record the bundled demo model: start here.")
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default=None,
    help="Where to run the demo model (default: cuda when available).",
)
@click.option(
    "--out",
    type=UserPath(file_okay=False, path_type=Path),
    default=None,
    help="The run directory to write, its missing parents created (default: ./kernelscope-demo-<time>).",
)
@SUMMARY_ROWS
@FORCE_RUN
def demo(device: str | None, out: Path | None, top_k: int | None, force: bool) -> None:
    """Profile the bundled demo model and print its per-function summary: the whole record → analyze path on this
    machine, no model of your own needed.

    \b
    Examples:
      kernelscope demo                  # ./kernelscope-demo-<time>/, CUDA if any
      kernelscope demo --device cpu --out demo-run
    """
    recorder = _import_recorder()
    import torch

    from .demo import demo_workload

    _refuse_existing(out, force)

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise click.BadParameter("torch sees no CUDA device", param_hint="--device cuda")
    dtype = torch.float16 if device == "cuda" else torch.float32
    model, samples = demo_workload(device, dtype)
    out = out or _default_run_dir("demo")
    profiler = recorder.ModuleFunctionKernelProfiler()
    finishing(out)
    with _existing_in_the_command_s_words(out), recorder_warnings():
        profiling_df, function_data = profiler.profile(model, samples, warmup_iterations=3, out=out, overwrite=force)
    _print_summary(profiler, profiling_df, function_data, top_k, f"kernelscope demo ({device}, {dtype})")
    _print_next(out)


EXISTS = "already exists; choose another --out, or replace it with --force"


def _refuse_existing(out: Path | None, force: bool) -> None:
    """An existing --out without --force, refused in the command's words (the recorder's name overwrite=True); and a
    closed stdout, where the summary goes (entry.py's stream refuses even nothing), before the model runs."""
    from kernelscope.analyzer.errors import RunExistsError

    sys.stdout.write("")
    if out is not None and not force and (out.exists() or out.is_symlink()):
        raise RunExistsError(out, EXISTS)


@contextlib.contextmanager
def _existing_in_the_command_s_words(out: Path) -> Iterator[None]:
    """A run another process put at --out once _refuse_existing had looked (two `record --out SAME` at once), refused
    in the command's words too."""
    from kernelscope.analyzer.errors import RunExistsError

    try:
        yield
    except RunExistsError:
        raise RunExistsError(out, EXISTS) from None


def _print_summary(profiler, profiling_df, function_data, top_k: int | None, title: str) -> None:
    """A recording's summary as ``analyze`` prints it: the same title, cut and footer."""
    summary = profiler.describe_results(profiling_df, function_data, top_k=None)
    shown = first_rows(summary, rows_to_show(top_k, TERMINAL))
    emit(shown, title=f"{title}: time by call")
    note_rows_left_out(len(shown), len(summary), "functions")
    print_footer(profiler.run)


def _print_next(out: Path) -> None:
    """Where the run went, and the command that reads it next (quoted for the shell, as a path may need)."""
    click.echo(f"run directory: {printable(str(out))}")
    click.echo(f"next: kernelscope analyze {shell_word(str(out))} --kernels")


@main.command(short_help="Record your model: pkg.module:factory.")
@click.argument("target")
@click.option(
    "--out",
    type=UserPath(file_okay=False, path_type=Path),
    default=None,
    help="The run directory to write, its missing parents created (default: ./kernelscope-<factory>-<time>).",
)
@click.option(
    "--warmup",
    type=WARMUP_PASSES,
    default=3,
    show_default=True,
    help="Passes over the samples before the recorded one.",
)
@SUMMARY_ROWS
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", type=UTF8_TEXT, help="A tag stored in the manifest.")
@FORCE_RUN
def record(target: str, out: Path | None, warmup: int, top_k: int | None, tags: tuple[str, ...], force: bool) -> None:
    """Record TARGET, 'pkg.module:factory' (the current directory on the import path, as with python -m) or
    'path/to/file.py:factory', whose factory returns (module, samples) or (fn, module): samples are a list of
    (args, kwargs), one per call of the module; fn is called as fn() and module is the hierarchy it runs.

    \b
    Examples:
      kernelscope record mymodels:make --out runs/base   # ./mymodels.py's make()
      kernelscope record path/to/bert.py:build --warmup 5 --tag batch=8
    """
    recorder = _import_recorder()
    from .targets import made_by, resolve_factory

    parsed_tags = _parse_tags(tags)
    _refuse_existing(out, force)  # before the factory builds the model
    with user_code(target, "importing its module"):
        factory = resolve_factory(target)
    with user_code(target, "the factory", caller="kernelscope.cli.record"):
        made = factory()
    fn, data, module = made_by(target, made)
    out = out or _default_run_dir(Path(target.rpartition(":")[2]).name)
    profiler = recorder.ModuleFunctionKernelProfiler()
    finishing(out)
    with (
        _existing_in_the_command_s_words(out),
        recorder_warnings(),
        user_code(target, "the model", caller="kernelscope.recorder.profiler._run_pass"),
    ):
        profiling_df, function_data = profiler.profile(
            fn, data, module=module, warmup_iterations=warmup, out=out, overwrite=force, tags=parsed_tags
        )
    if profiling_df.empty:  # analyze refuses a run with nothing in it: no empty table, no next command that fails
        diagnostic(
            f"kernelscope: warning: {target}: the model ran no operator while recorded, so the run holds nothing to "
            "analyze"
        )
        click.echo(f"run directory: {out}")
        return
    _print_summary(profiler, profiling_df, function_data, top_k, f"kernelscope record {target}")
    _print_next(out)


def _parse_tags(tags: tuple[str, ...]) -> dict:
    parsed = {}
    for tag in tags:
        key, sep, value = tag.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{tag!r} is not KEY=VALUE", param_hint="--tag")
        if key in parsed:  # the last one kept, silently, as --against refuses a name given twice
            raise click.BadParameter(f"{key!r} is tagged twice ({parsed[key]!r} and {value!r})", param_hint="--tag")
        parsed[key] = value
    return parsed


@main.command(short_help="The time by call, or the kernel rows, of a run.")
@click.argument("run", type=UserPath(path_type=str))
@TOP_K
@click.option(
    "--kernels", is_flag=True, help="One row per kernel (profiling_df) instead of the summary; in a table the longest."
)
@rank_option
@click.option("--by-rank", is_flag=True, help="One summary per rank, with a rank column.")
@click.option(
    "--by",
    "group",
    type=BY_COLUMN,
    default=None,
    help="Device time by this column instead of by call (default: by call; by op for a trace without calls).",
)
@click.option("--inclusive", is_flag=True, help="With --by module_name: each module's time with its submodules'.")
@FULL_NAMES
@run_option
@prefix_options
@output_options
def analyze(
    run: str,
    top_k: int | None,
    kernels: bool,
    rank: int | None,
    by_rank: bool,
    group: str | None,
    inclusive: bool,
    full_names: bool,
    run_ref: str | None,
    module_prefix,
    function_prefix,
    output: Output,
) -> None:
    """Summarize a run directory, a job directory of ranks, any Kineto trace (.json / .json.gz), or one run
    of an archive (--run ID): the same tables as the run it was archived from.

    \b
    Examples:
      kernelscope analyze RUN                   # time by call, the 10 costliest
      kernelscope analyze RUN --by module_name --top-k 0       # every module
      kernelscope analyze RUN --kernels -o kernels.csv  # every kernel row
      kernelscope analyze trace.json.gz         # a torch.profiler trace
    """
    if inclusive and group != "module_name":
        raise click.UsageError("--inclusive needs --by module_name (the time of a module with its submodules')")
    grouped = group not in (None, "function")
    if full_names and not (kernels or group == "kernel"):  # no kernel name in the table: the option would do nothing
        raise click.UsageError("--full-names names kernels: with --kernels or --by kernel")
    if kernels and grouped:
        raise click.UsageError("--kernels lists rows and --by groups them: give one of the two")
    if by_rank and (rank is not None or kernels or grouped):
        other = "--rank" if rank is not None else "--kernels" if kernels else "--by"
        raise click.UsageError(f"--by-rank is a summary of calls per rank; with {other}, name one rank with --rank N")
    limit = rows_to_show(top_k, output)
    with load_run_of(run, module_prefix, function_prefix, run_ref) as loaded:
        check_rank(run, loaded, rank)
        if kernels:
            title = "kernels, the longest first" if limit else "kernels"
            what = "device rows" if loaded.device == "cuda" else "CPU operator rows"  # as print_footer names them
            frame = kernel_table(loaded.profiling_df(rank, top_k=limit), output)
            total = loaded.con.execute(
                "SELECT count(*) FROM kernels" + ("" if rank is None else f" WHERE rank = {int(rank)}")
            ).fetchone()[0]
        elif inclusive:
            from kernelscope.analyzer.tree import inclusive_module_time

            whole = inclusive_module_time(loaded, 2**62)
            title, what = "time by module_name, submodules included", "modules"
            frame, total = first_rows(whole, limit), len(whole)
        else:
            whole, title, what, by = _summary(loaded, group, rank, by_rank)
            frame, total = first_rows(whole, limit, by), len(whole)
        frame = name_the_root(shorten_kernel_names(frame, output, full_names), output)
        emit(frame, output, title=f"{run_label(run, run_ref, loaded, rank)}: {title}")
        if output.to_terminal:
            note_rows_left_out(len(frame), total, what + (" (per rank)" if by_rank else ""))
            print_footer(loaded, rank, rows_shown=kernels)
        for note in loaded.notes():  # on stderr, whatever the format: device events no row holds
            diagnostic(f"kernelscope: note: {note}")


def _summary(loaded, group: str | None, rank: int | None, by_rank: bool):
    """(every row, title, what a row is, the column each rank's rows are cut by) of the summary asked for."""
    if group not in (None, "function"):
        # a CPU recording's "kernels" are CPU operators, as its footer and the column cpu_operators name them
        what = "CPU operators" if group == "kernel" and loaded.device != "cuda" else GROUPS[group]
        return loaded.time_by(group, None, rank), f"time by {group}", what, None
    frame = loaded.describe_by_rank(None) if by_rank else loaded.describe(None, rank)
    if frame.empty and group is None:  # no call in the trace (no scope, no Python frame): by operator then
        if by_rank:
            return loaded.time_by_rank("op", None), "time by op per rank (the trace names no call)", "operators", "rank"
        return loaded.time_by("op", None, rank), "time by op (the trace names no call)", "operators", None
    if by_rank:
        return frame, "time by call, per rank", "functions", "rank"
    return frame, "time by call", "functions", None


main.add_command(sql)
main.add_command(archive)
main.add_command(runs)
main.add_command(diff)
main.add_command(bench)
main.add_command(tree)
main.add_command(report)

if __name__ == "__main__":
    main()
