"""The ``kernelscope`` command: record (demo, record) on a torch machine, analyze (analyze, sql) anywhere."""

from __future__ import annotations

import datetime as _dt
import importlib
import os
import signal
import sys
from pathlib import Path

import click

from .archive_commands import archive, runs
from .bench_command import bench
from .diff_command import diff
from .interrupts import ended_by_signals, exit_code, name
from .loading import load_run_of, prefix_options, run_option
from .output import Output, emit, output_options
from .report_command import report
from .sql_command import sql
from .tree_command import tree

TORCH_HINT = "this command records and needs torch: pip install 'kernelscope[record]'"
TOP_K = click.option("--top-k", type=click.IntRange(min=0), default=10, show_default=True)
FORCE_RUN = click.option("--force", is_flag=True, help="Replace the run directory if it exists.")


class KernelscopeGroup(click.Group):
    """Expected failures become one line on stderr and exit code 2, without a traceback."""

    def invoke(self, ctx):
        from kernelscope.analyzer.errors import KernelscopeError, printable

        with ended_by_signals() as received:
            try:
                result = super().invoke(ctx)
                sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
            except BrokenPipeError:  # the reader (head, less) stopped reading: it had what it wanted
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the last flush has nowhere to fail
                sys.exit(0)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt) and not received:
                    received.append(signal.SIGINT)  # Ctrl-C: the cleanup ran on the way here, as for the others
                if received:  # whatever the signal turned into on its way out
                    click.echo(f"kernelscope: stopped by {name(received[0])}", err=True)
                    sys.exit(exit_code(received[0]))
                if isinstance(exc, KernelscopeError):
                    click.echo(f"kernelscope: error: {exc}", err=True)
                    sys.exit(exc.exit_code)
                if isinstance(exc, OSError):  # a full disk or a vanished directory while writing: not a bug
                    where = f"{exc.filename}: " if exc.filename else ""
                    click.echo(printable(f"kernelscope: error: {where}{exc.strerror or exc}"), err=True)
                    sys.exit(2)
                raise
            if received:
                sys.exit(exit_code(received[0]))
            return result


@click.group(cls=KernelscopeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kernelscope")
def main() -> None:
    """Which torch.nn.functional call, inside which nn.Module, launched every GPU kernel."""


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
    try:
        return importlib.import_module("kernelscope.recorder")
    except ImportError as exc:
        if getattr(exc, "name", None) == "torch":
            raise click.ClickException(TORCH_HINT) from None
        raise


@main.command()
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default=None,
    help="Where to run the demo model (default: cuda when available).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The run directory to write (default: ./kernelscope-demo-<time>).",
)
@TOP_K
@FORCE_RUN
def demo(device: str | None, out: Path | None, top_k: int, force: bool) -> None:
    """Profile the bundled demo model and print its per-function summary."""
    recorder = _import_recorder()
    import torch

    from .demo import demo_workload

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise click.ClickException("--device cuda was asked for, but torch sees no CUDA device")
    dtype = torch.float16 if device == "cuda" else torch.float32
    model, samples = demo_workload(device, dtype)
    out = out or _default_run_dir("demo")
    profiler = recorder.ModuleFunctionKernelProfiler()
    profiling_df, function_data = profiler.profile(model, samples, warmup_iterations=3, out=out, overwrite=force)
    summary = profiler.describe_results(profiling_df, function_data, top_k=top_k)
    emit(summary, title=f"kernelscope demo ({device}, {dtype}): time by functional call")
    _footer(profiler.run)
    click.echo(f"run directory: {out}")
    click.echo(f"next: kernelscope analyze {out} --kernels")


@main.command()
@click.argument("target")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The run directory to write (default: ./kernelscope-<factory>-<time>).",
)
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True)
@TOP_K
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", help="A tag stored in the manifest.")
@FORCE_RUN
def record(target: str, out: Path | None, warmup: int, top_k: int, tags: tuple[str, ...], force: bool) -> None:
    """Record TARGET, 'pkg.module:factory', whose factory returns (module, samples) or (fn, module)."""
    recorder = _import_recorder()
    from torch import nn

    factory = _resolve(target)
    made = factory()
    if not (isinstance(made, tuple) and len(made) == 2):
        raise click.ClickException(f"{target} must return (module, samples) or (fn, module)")
    first, second = made
    if isinstance(second, nn.Module):
        fn, data, module = first, None, second
    elif isinstance(first, nn.Module):
        fn, data, module = first, list(second), None
    else:
        raise click.ClickException(f"{target} returned neither (module, samples) nor (fn, module)")
    out = out or _default_run_dir(target.rpartition(":")[2])
    profiler = recorder.ModuleFunctionKernelProfiler()
    profiling_df, function_data = profiler.profile(
        fn, data, module=module, warmup_iterations=warmup, out=out, overwrite=force, tags=_parse_tags(tags)
    )
    emit(profiler.describe_results(profiling_df, function_data, top_k=top_k))
    _footer(profiler.run)
    click.echo(f"run directory: {out}")


def _resolve(target: str):
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise click.BadParameter("expected 'pkg.module:factory'", param_hint="TARGET")
    sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    finally:
        sys.path.pop(0)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise click.BadParameter(f"{module_name} has no attribute {attribute!r}", param_hint="TARGET") from None


def _parse_tags(tags: tuple[str, ...]) -> dict:
    parsed = {}
    for tag in tags:
        key, sep, value = tag.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{tag!r} is not KEY=VALUE", param_hint="--tag")
        parsed[key] = value
    return parsed


@main.command()
@click.argument("run", type=click.Path(path_type=str))
@TOP_K
@click.option("--kernels", is_flag=True, help="Print one row per kernel (profiling_df) instead of the summary.")
@click.option("--rank", type=int, default=None, help="Only this rank of a multi-rank run (default: all, merged).")
@click.option("--by-rank", is_flag=True, help="One summary per rank, with a rank column.")
@click.option(
    "--by",
    "group",
    type=click.Choice(["function", "op", "module_name", "kernel", "call_op"]),
    default=None,
    help="Device time by this column instead of by call (default: by call; by op for a trace without calls).",
)
@click.option("--inclusive", is_flag=True, help="With --by module_name: each module's time with its submodules'.")
@run_option
@prefix_options
@output_options
def analyze(
    run: str,
    top_k: int,
    kernels: bool,
    rank: int | None,
    by_rank: bool,
    group: str | None,
    inclusive: bool,
    run_ref: str | None,
    module_prefix,
    function_prefix,
    output: Output,
) -> None:
    """Summarize a run directory, a job directory of ranks, any Kineto trace (.json / .json.gz), or one run
    of an archive (--run ID): the same tables as the run it was archived from."""
    if inclusive and group != "module_name":
        raise click.UsageError("--inclusive needs --by module_name (the time of a module with its submodules')")
    with load_run_of(run, module_prefix, function_prefix, run_ref) as loaded:
        if rank is not None and rank not in loaded.ranks:
            raise click.BadParameter(f"{run} has ranks {', '.join(map(str, loaded.ranks))}", param_hint="--rank")
        title = "time by call"
        if kernels:
            frame, title = loaded.profiling_df(rank), "kernels"
        elif inclusive:
            from kernelscope.analyzer.tree import inclusive_module_time

            frame, title = inclusive_module_time(loaded, top_k), "time by module_name, submodules included"
        elif group not in (None, "function"):
            frame, title = _time_by(loaded, group, top_k, rank, by_rank), f"time by {group}"
        else:
            frame = loaded.describe_by_rank(top_k) if by_rank else loaded.describe(top_k, rank)
            if frame.empty and group is None:  # no call in the trace (no scope, no Python frame): by operator then
                frame, title = _time_by(loaded, "op", top_k, rank, by_rank), "time by op (the trace names no call)"
        emit(frame, output, title=f"{run}: {title}")
        if output.to_terminal:
            _footer(loaded)
        for note in loaded.notes():  # on stderr, whatever the format: device events no row holds
            click.echo(f"kernelscope: note: {note}", err=True)


def _time_by(run, column: str, top_k: int, rank: int | None, by_rank: bool):
    return run.time_by_rank(column, top_k) if by_rank else run.time_by(column, top_k, rank)


def _footer(run) -> None:
    """Where the time went outside the table: totals, unattributed share, profiler losses."""
    total, in_function, rows = run.con.execute(
        "SELECT coalesce(sum(kernel_us), 0), coalesce(sum(kernel_us) FILTER (WHERE function_name IS NOT NULL), 0), "
        "count(*) FROM kernels"
    ).fetchone()
    share = 100.0 * in_function / total if total else 0.0
    what = "device" if run.device == "cuda" else "CPU operator"
    click.echo(
        f"{rows} {what} rows, {total:,.1f} µs in all; {share:.1f}% inside a named call, "
        f"{100 - share:.1f}% outside any (see --kernels)."
    )
    check = run.launch_check()
    if not check.ok:
        click.echo(
            f"warning: the profiler lost events: {check.launches_without_device_event} launches without "
            f"device event, {check.device_events_without_launch} device events without launch.",
            err=True,
        )


main.add_command(sql)
main.add_command(archive)
main.add_command(runs)
main.add_command(diff)
main.add_command(bench)
main.add_command(tree)
main.add_command(report)

if __name__ == "__main__":
    main()
