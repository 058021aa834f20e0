"""``kernelscope bench``: replay a run's recorded calls as kernel benchmarks, and time alternatives on the same
inputs (docs/bench.md); exit 1 when an alternative's result does not match the original's."""

from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .loading import in_run_directory, rank_option
from .numbers import NON_NEGATIVE, REPEATS, ROWS, WARMUP_CALLS
from .output import Output, diagnostic, emit, print_note, print_table
from .output_options import output_options
from .paths import UserPath
from .utf8_text import UTF8_TEXT

if TYPE_CHECKING:  # loaded where a command runs: --help and usage errors need none of it
    import pandas as pd

MISMATCH_EXIT = 1
TABLE_COLUMNS = [  # the table on a terminal, what a first look needs first: a narrow one leaves out the last ones
    "function_name", "sample_id", "implementation", "status", "speedup", "max_abs_err", "calls", "recorded_us",
    "replayed_us", "ratio", "share_pct", "saving_us", "reason", "signature",
]  # fmt: skip
SAVING_FIRST = ["function_name", "implementation", "saving_us", "saving_pct", "speedup"]  # before a narrow one's cut
ALTERNATIVE_COLUMNS = ("implementation", "speedup", "saving_us", "max_abs_err")  # say nothing without --against
TABLE_NOTE = "ratio = replayed_us / recorded_us; every column (min_us, max_us, …): --format csv or -o FILE"
CPU_NOTE = (  # a CPU ratio reads as a speed-up or a slow-down of the call, which it is not (docs/bench.md, "Timing")
    "recorded on the CPU: recorded_us are the self times of the call's operators under the profiler and replayed_us "
    "a warm call's wall clock, which compare loosely; compare implementations (--against) on the same replays"
)
# --format csv writes the per-sample rows, and each saving as a line on stderr: the API holds the table's every column
SAVINGS_EVERY_COLUMN = "ks.bench_savings(frame) has them"
TORCH_HINT = "kernelscope bench replays calls and needs torch: pip install 'kernelscope[record]'"


@click.command(short_help="Replay recorded calls as kernel benchmarks.")
@click.argument("run", type=UserPath(path_type=str))
@click.option(
    "--function", "functions", multiple=True, metavar="NAME", type=UTF8_TEXT, help="A call to replay (repeatable)."
)
@click.option(
    "--top-k",
    type=ROWS,
    default=5,
    show_default=True,
    help="Without --function: the first calls by time; 0 = all.",
)
@click.option("--repeat", type=REPEATS, default=50, show_default=True, help="Timed calls per sample.")
@click.option("--warmup", type=WARMUP_CALLS, default=10, show_default=True, help="Untimed calls first.")
@click.option(
    "--device", type=click.Choice(["cuda", "cpu"]), default=None, help="Where to replay (default: where recorded)."
)
@click.option(
    "--against",
    "alternatives",
    multiple=True,
    metavar="NAME=MODULE:CALLABLE",
    help="An implementation of the call's signature to time and check on the same samples (repeatable).",
)
@click.option("--rtol", type=NON_NEGATIVE, default=None, help="Relative tolerance (default: by dtype).")
@click.option("--atol", type=NON_NEGATIVE, default=None, help="Absolute tolerance (default: by dtype).")
@rank_option(default="the run's only rank; a job of several ranks needs one")
@click.option("--no-flush-l2", is_flag=True, help="Do not clear the GPU's L2 before each timed call.")
@click.option(
    "--scripts",
    type=UserPath(file_okay=False, path_type=Path),
    default=None,
    help="Write one standalone benchmark script per call (and its samples) into this directory.",
)
@output_options
def bench(
    run: str,
    functions: tuple[str, ...],
    top_k: int,
    repeat: int,
    warmup: int,
    device: str | None,
    alternatives: tuple[str, ...],
    rtol: float | None,
    atol: float | None,
    rank: int | None,
    no_flush_l2: bool,
    scripts: Path | None,
    output: Output,
) -> None:
    """Replay every distinct input sample of RUN's calls as the model made them (default: the top-k by time),
    timed against the recorded time, and time each --against implementation on the same samples (docs/bench.md).

    \b
    Examples:
      kernelscope bench RUN             # the 5 costliest calls
      kernelscope bench RUN --function linear --against mine=my_kernels:linear
      kernelscope bench RUN --function linear --scripts bench-scripts/
    """
    try:
        recorder_bench = importlib.import_module("kernelscope.recorder.bench")
    except ImportError as exc:
        if getattr(exc, "name", None) == "torch":
            raise click.ClickException(TORCH_HINT) from None
        raise
    import torch  # bench's own import has loaded it
    from kernelscope.analyzer.ranks import UnknownRank

    if device == "cuda" and not torch.cuda.is_available():  # in the command's words, as demo says it
        raise click.BadParameter("torch sees no CUDA device", param_hint="--device cuda")
    against = _parse_against(alternatives)
    if against and len(functions) != 1:  # in the command's words (bench() names its arguments), before the run is read
        given = f", not {len(functions)}" if functions else ""
        raise click.UsageError(f"--against replaces one call: name it with one --function NAME{given}")
    with in_run_directory(run), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        try:
            frame = recorder_bench.bench(
                run, list(functions) or None, top_k=top_k or 2**31, repeat=repeat, warmup=warmup, device=device,
                against=against, rtol=rtol, atol=atol, rank=rank, flush_l2=not no_flush_l2, scripts=scripts,
                overwrite=output.force,
            )  # fmt: skip
        except UnknownRank as exc:
            raise click.BadParameter(str(exc), param_hint="--rank") from None
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    for warning in caught:
        if issubclass(warning.category, RuntimeWarning):
            diagnostic(f"kernelscope: warning: {str(warning.message).removeprefix('kernelscope: ')}")
    emit(
        table_view(frame) if output.to_terminal else frame, output, title=f"{run}: {_where(frame)}",
        every_column="--format csv or -o FILE shows them",
    )  # fmt: skip
    if output.to_terminal and not frame.empty:
        if ((frame["recorded_on"] == "cpu") & (frame["replayed_on"] == "cpu")).any():
            print_note(CPU_NOTE)
        print_note(TABLE_NOTE)
    saved = recorder_bench.bench_savings(frame)
    if against and output.to_terminal:
        print_table(
            saved[[*SAVING_FIRST, *(c for c in saved.columns if c not in SAVING_FIRST)]],
            title="projected saving over the pass (the samples where the alternative matched)",
            every_column=SAVINGS_EVERY_COLUMN,
        )
    elif against:
        for row in saved.itertuples(index=False):
            diagnostic(
                f"projected saving of {row.implementation} on {row.function_name}: {row.saving_us:,.1f} µs "
                f"({row.saving_pct:.2f}% of the pass), {row.speedup:.2f}x"
            )
    if scripts is not None:
        (print_note if output.to_terminal else diagnostic)(f"benchmark scripts: {scripts}")
    failed = frame[frame["status"].isin(recorder_bench.FAILED) & (frame["implementation"] != "original")]
    if len(failed):
        for name, group in failed.groupby("implementation", sort=False):
            diagnostic(f"kernelscope: {name} does not match the original: {_failures(group)}")
        sys.exit(MISMATCH_EXIT)


def table_view(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns a terminal shows, the signature last (the widest): without an alternative, none of an
    alternative's; ``reason`` only where a row has one."""
    columns = [c for c in TABLE_COLUMNS if c != "reason" or frame["reason"].notna().any()]
    if (frame["implementation"] == "original").all():
        columns = [c for c in columns if c not in ALTERNATIVE_COLUMNS]
    return frame[columns]


def _parse_against(values: tuple[str, ...]) -> dict[str, str]:
    against = {}
    for value in values:
        name, sep, target = value.partition("=")
        if not sep or not name or ":" not in target:
            raise click.BadParameter(f"{value!r} is not NAME=MODULE:CALLABLE", param_hint="--against")
        if name in against:
            raise click.BadParameter(f"{name!r} is named twice", param_hint="--against")
        against[name] = target
    try:
        importlib.import_module("kernelscope.recorder.bench").resolve_alternatives(against)
    except (ImportError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="--against") from None
    return against


def _where(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "no call to replay"
    recorded, replayed = frame["recorded_on"].iloc[0], frame["replayed_on"].iloc[0]
    return f"recorded on {recorded or 'an unknown device'}, replayed on {replayed}"


def _failures(rows: pd.DataFrame) -> str:
    parts = []
    for row in rows.itertuples(index=False):
        if row.status == "mismatch":
            parts.append(
                f"{row.function_name} sample {row.sample_id} (max abs err {row.max_abs_err:.3g}, "
                f"max rel err {row.max_rel_err:.3g})"
            )
        else:
            parts.append(f"{row.function_name} sample {row.sample_id} ({row.reason})")
    return "; ".join(parts)
