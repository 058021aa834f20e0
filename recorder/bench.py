"""Kernel benchmarks from a recording: replay every distinct sample of a call as the model made it, time it, and
time alternative implementations on the same inputs (``kernelscope bench``, docs/bench.md)."""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from time import perf_counter, process_time
from typing import Any

import pandas as pd
import torch
from kernelscope.analyzer.samples import render_call

from .bench_scripts import check_script_destination, script_stems, staged_scripts, write_script
from .bench_sources import Samples, open_samples, recorded_times, replay_device_name
from .compare import compare
from .replay import Callee, NotReplayable, SampleInputs, error_reason, resolve_call
from .timing import release_buffers, time_call

ORIGINAL = "original"
COLUMNS = [
    "function_name", "sample_id", "implementation", "status", "signature", "calls", "recorded_us", "replayed_us",
    "min_us", "max_us", "ratio", "weight_us", "share_pct", "speedup", "saving_us", "saving_pct", "max_abs_err",
    "max_rel_err", "recorded_on", "replayed_on", "reason",
]  # fmt: skip
FAILED = ("mismatch", "failed")  # an alternative's statuses that make `kernelscope bench` exit 1
NOISY_SPREAD = 10  # a median this many times its fastest repeat is a machine's contention, not the call's cost
NOISE_REPEATS = 5  # fewer repeats have no median to judge by (of 2 it is their mean)
CPU_SHARE_LEAST = 0.5  # a CPU replay that ran for less of its wall clock waited for the CPU more than it computed
CPU_SHARE_MIN_S = 0.01  # a replay shorter than this is not judged by its CPU time, whose clock ticks too coarsely


def bench(
    source: Any,
    functions: Sequence[str] | None = None,
    *,
    top_k: int = 5,
    repeat: int = 50,
    warmup: int = 10,
    device: str | None = None,
    against: Mapping[str, Callable | str] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    rank: int | None = None,
    flush_l2: bool = True,
    scripts: str | os.PathLike | None = None,
    overwrite: bool = False,
) -> pd.DataFrame:
    """One row per (function, sample, implementation): the recorded time of the sample's calls, the replayed
    time (median, min, max over ``repeat`` timed calls after ``warmup``), and for each alternative of
    ``against`` (``{name: callable or "module:callable"}``) its speed-up, the projected saving and whether its
    result matches the original's (compare.py).

    ``source``: a run directory, a ``Run``, a ``ModuleFunctionKernelProfiler`` that has recorded, or a
    ``function_data`` dict. ``functions``: the calls to replay (default: the ``top_k`` first by time).
    ``device``: ``"cuda"`` or ``"cpu"`` (default: where the run was recorded). ``scripts``: a directory to
    write one standalone benchmark per replayed call into (bench_scripts.py); ``overwrite`` replaces them.
    """
    if top_k < 0 or repeat < 1 or warmup < 0:
        raise ValueError("top_k and warmup must be >= 0 and repeat >= 1")
    if isinstance(functions, str):  # iterated, a name is its letters: 'no call named "r"'
        raise TypeError(f"functions is a list of names, not one string: [{functions!r}]")
    alternatives = resolve_alternatives(against or {})
    with open_samples(source, rank) as samples, torch.no_grad():
        target = replay_device(device, samples)
        replayed_on = replay_device_name(target)
        chosen = chosen_functions(samples, functions, top_k)
        if alternatives and len(chosen) != 1:
            raise ValueError(f"an alternative (against) replaces one call: name it (functions), not {len(chosen)}")
        stems = script_stems(chosen)
        if scripts is not None:
            check_script_destination(Path(scripts), stems, overwrite)
        comparable = samples.recorded_on == replayed_on
        if samples.recorded_on is not None and not comparable:
            warnings.warn(
                f"kernelscope: {samples.where} was recorded on {samples.recorded_on} and is replayed on "
                f"{replayed_on}: recorded and replayed times are not compared (ratio and saving_pct are NaN)",
                RuntimeWarning,
                stacklevel=3,
            )
        context = _Context(samples, target, replayed_on, comparable, repeat, warmup, flush_l2, rtol, atol)
        rows = []
        staged = staged_scripts(Path(scripts), overwrite) if scripts is not None else contextlib.nullcontext()
        try:
            with staged as staging:  # the scripts go in place once every call is benched
                for function in chosen:
                    function_rows, script = _bench_function(function, context, alternatives)
                    rows.extend(function_rows)
                    if staging is not None and script is not None:
                        recorded_on = samples.recorded_on or "an unknown device"
                        write_script(
                            staging,
                            stems[function],
                            *script,
                            samples.recorded_type,
                            recorded_on,
                            samples.where,
                            Path(scripts),
                        )
        finally:
            release_buffers()
    frame = pd.DataFrame(rows, columns=COLUMNS).astype({"sample_id": "Int64", "calls": "Int64"})
    if repeat >= NOISE_REPEATS:
        _warn_of_noise(frame)
        _warn_of_waits(context.cpu_shares)
    return frame


def _warn_of_waits(shares: list[tuple[float, str]]) -> None:
    """A warning where a CPU replay's process ran for under CPU_SHARE_LEAST of its wall clock: it waited for a CPU
    other processes held, every repeat alike (no spread shows it), and its times hold those waits."""
    waited = [share for share in shares if share[0] < CPU_SHARE_LEAST]
    if waited:
        share, label = min(waited)
        warnings.warn(
            f"kernelscope: the replays had the CPU for {share:.0%} of their wall clock ({label}, the least; "
            f"{len(waited)} of {len(shares)} under {CPU_SHARE_LEAST:.0%}): other processes held it, and replayed_us, "
            "ratio and speedup hold the waits; replay on an idle machine",
            RuntimeWarning,
            stacklevel=3,
        )


def _warn_of_noise(frame: pd.DataFrame) -> None:
    """A warning naming the replays whose median is NOISY_SPREAD times their fastest repeat or more: a replay on
    several threads of a busy CPU waits for the descheduled ones (docs/bench.md, "Timing"), and its replayed_us,
    ratio and speedup then say nothing of the call."""
    timed = frame[frame["min_us"].notna()]
    noisy = timed[timed["replayed_us"] >= NOISY_SPREAD * timed["min_us"]]
    if noisy.empty:
        return
    worst = noisy.loc[(noisy["replayed_us"] / noisy["min_us"]).idxmax()]
    which = "" if worst["implementation"] == ORIGINAL else f" {worst['implementation']}"
    warnings.warn(
        f"kernelscope: {len(noisy)} of {len(timed)} replays' median is over {NOISY_SPREAD}x their fastest repeat "
        f"({worst['function_name']}{which} sample {worst['sample_id']}: {worst['replayed_us']:,.1f} µs, min_us "
        f"{worst['min_us']:,.1f}): other processes kept the {worst['replayed_on']} busy and these medians are "
        "noise; replay on an idle machine (on the CPU, OMP_NUM_THREADS=1 replays on one thread)",
        RuntimeWarning,
        stacklevel=3,
    )


def bench_savings(frame: pd.DataFrame) -> pd.DataFrame:
    """Per function and alternative, over the samples where the alternative matched: ``samples``, ``calls``,
    ``original_us`` and ``alternative_us`` (Σ calls × replayed µs per call), ``saving_us``, ``saving_pct`` (of
    the pass's device time; NaN across devices) and ``speedup`` (original_us / alternative_us)."""
    columns = ["function_name", "implementation", "samples", "calls", "original_us", "alternative_us", "saving_us",
               "saving_pct", "speedup"]  # fmt: skip
    alternatives = frame[(frame["implementation"] != ORIGINAL) & (frame["status"] == "ok")]
    rows = []
    for (function, name), group in alternatives.groupby(["function_name", "implementation"], sort=False):
        alternative_us = float((group["calls"] * group["replayed_us"]).sum())
        saving_us = float(group["saving_us"].sum())
        original_us = alternative_us + saving_us
        speedup = original_us / alternative_us if alternative_us > 0 else math.nan
        rows.append((function, name, len(group), int(group["calls"].sum()), original_us, alternative_us, saving_us,
                     float(group["saving_pct"].sum(min_count=1)), speedup))  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def resolve_alternatives(against: Mapping[str, Callable | str]) -> dict[str, Callable]:
    """``{name: callable}``; a ``"module:callable"`` string is imported (the working directory first on the path)."""
    resolved = {}
    for name, target in against.items():
        if not name or name == ORIGINAL:
            raise ValueError(f"an alternative needs a name other than {ORIGINAL!r}")
        try:
            resolved[name] = import_callable(target) if isinstance(target, str) else target
        except ModuleNotFoundError as exc:  # the module itself, not one it imports (whose error is the user's)
            module = target.partition(":")[0]
            if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
                raise
            raise ValueError(
                f"alternative {name!r} ({target!r}): no module named {exc.name!r} here ({Path.cwd()}) or on the "
                "import path; run from the folder that holds it"
            ) from None
        if not callable(resolved[name]):
            raise ValueError(f"alternative {name!r} is not callable")
    return resolved


def import_callable(target: str) -> Callable:
    """``module:callable`` (dotted attributes allowed after the colon), imported."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"{target!r} is not MODULE:CALLABLE")
    sys.path.insert(0, str(Path.cwd()))
    try:
        value: Any = importlib.import_module(module_name)
    finally:
        sys.path.pop(0)
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ValueError(f"{module_name} has no attribute {attribute!r}")
        value = getattr(value, part)
    return value


def replay_device(requested: str | None, samples: Samples) -> torch.device:
    """Where to replay: ``requested``, else where the samples were recorded."""
    if requested not in (None, "cuda", "cpu"):
        raise ValueError(f"device must be 'cuda' or 'cpu', not {requested!r}")
    wanted = requested or samples.recorded_type
    if wanted == "cuda" and not torch.cuda.is_available():
        if requested is None:
            raise ValueError(
                f"{samples.where} was recorded on {samples.recorded_on or 'cuda'} and torch sees no CUDA device here: "
                "replay it on the CPU with device='cpu' (--device cpu), whose times do not compare with the recorded"
            )
        raise ValueError("device='cuda' was asked for, but torch sees no CUDA device")
    return torch.device("cuda", torch.cuda.current_device()) if wanted == "cuda" else torch.device("cpu")


def chosen_functions(samples: Samples, functions: Sequence[str] | None, top_k: int) -> list[str]:
    """``functions`` (each checked), else the ``top_k`` first calls by recorded time (by calls without a trace)."""
    if samples.run is not None:
        known = list(samples.run.describe(top_k=2**31, rank=samples.rank)["function_name"])
        known += [name for name in samples.entries if name not in known]
    else:
        known = sorted(samples.entries, key=lambda name: -sum(calls for calls, _, _ in samples.entries[name]))
    if not functions:
        return known[:top_k]
    for name in functions:
        if name not in known:
            raise ValueError(f"{samples.where} has no call named {name!r} (its calls: {', '.join(sorted(known))})")
    return list(dict.fromkeys(functions))


class _Context:
    def __init__(self, samples, device, replayed_on, comparable, repeat, warmup, flush_l2, rtol, atol) -> None:
        self.samples, self.device, self.replayed_on, self.comparable = samples, device, replayed_on, comparable
        self.repeat, self.warmup, self.flush_l2, self.rtol, self.atol = repeat, warmup, flush_l2, rtol, atol
        self.cpu_shares: list[tuple[float, str]] = []  # per CPU replay: its process's CPU time / its wall clock

    def time(self, call: Callable, label: str) -> tuple[float, float, float]:
        if self.device.type != "cpu":
            return time_call(call, self.device, self.repeat, self.warmup, self.flush_l2)
        wall, cpu = perf_counter(), process_time()
        timing = time_call(call, self.device, self.repeat, self.warmup, self.flush_l2)
        elapsed = perf_counter() - wall
        if elapsed >= CPU_SHARE_MIN_S:
            self.cpu_shares.append(((process_time() - cpu) / elapsed, label))
        return timing


def _bench_function(function: str, context: _Context, alternatives: dict[str, Callable]) -> tuple[list, tuple | None]:
    """The rows of one call, and what a script of it holds: ``(callee, [(sample id, calls, signature, recorded
    µs per call, inputs on the CPU)])`` (None when it has no replayable sample)."""
    samples = context.samples
    entries = samples.entries.get(function, [])
    recorded = recorded_times(samples, function) if entries else {}
    base = {"function_name": function, "recorded_on": samples.recorded_on, "replayed_on": context.replayed_on}
    callee, refused = None, None
    try:
        callee = resolve_call(function)
    except NotReplayable as refusal:
        refused = refusal.reason
    if not entries:
        reason = refused or "its samples were not collected (function_names)"
        return [{**base, "implementation": ORIGINAL, "status": "refused", "reason": reason}], None
    rows, replayable = [], []
    for sample_id, (calls, stored, meta) in enumerate(entries):
        total_us, pass_us = recorded.get(sample_id, (math.nan, math.nan))
        row = {**base, "sample_id": sample_id, "signature": render_call(meta), "calls": calls,
               "recorded_us": total_us / calls, "weight_us": total_us,
               "share_pct": 100 * total_us / pass_us if pass_us else math.nan}  # fmt: skip
        if callee is None:
            rows.append(_done(row, ORIGINAL, "refused", reason=refused))
            continue
        try:
            inputs = SampleInputs(stored, meta, samples.recorded_type, context.device, samples.not_kept)
        except NotReplayable as refusal:
            rows.append(_done(row, ORIGINAL, refusal.status, reason=refusal.reason))
            continue
        on_cpu = SampleInputs(stored, meta, samples.recorded_type, torch.device("cpu"), samples.not_kept)
        replayable.append((sample_id, calls, row["signature"], row["recorded_us"], on_cpu))
        rows.extend(_bench_sample(callee, inputs, row, pass_us, context, alternatives))
    return rows, ((callee, replayable) if replayable else None)


def _bench_sample(
    callee: Callee, inputs: SampleInputs, row: dict, pass_us: float, context: _Context, alternatives: dict
) -> list[dict]:
    try:
        args, kwargs = inputs.make()
        label = f"{row['function_name']} sample {row['sample_id']}"
        fastest, median, slowest = context.time(lambda: callee.function(*args, **kwargs), label)
    except Exception as exc:  # the replay of a recorded call failed: say why, go on with the others
        return [_done(row, ORIGINAL, "failed", reason=error_reason(exc))]
    if math.isnan(row["weight_us"]):  # no trace to weigh it by: the replayed time
        row["weight_us"] = row["calls"] * median
    rows = [_timed(row, ORIGINAL, "ok", context, (fastest, median, slowest))]
    expected = None
    for name, alternative in alternatives.items():
        try:
            if expected is None:
                expected = _result(callee.function, inputs)
            verdict = compare(_result(alternative, inputs), expected, context.rtol, context.atol)
            alt_args, alt_kwargs = inputs.make()
            timing = context.time(lambda: alternative(*alt_args, **alt_kwargs), f"{name} on {label}")  # noqa: B023
        except Exception as exc:
            rows.append(_done(row, name, "failed", reason=error_reason(exc)))
            continue
        alt_row = _timed(row, name, "ok" if verdict.match else "mismatch", context, timing, verdict.reason)
        alt_row.update(max_abs_err=verdict.max_abs_err, max_rel_err=verdict.max_rel_err)
        alt_row["speedup"] = median / timing[1] if timing[1] > 0 else math.nan
        alt_row["saving_us"] = row["calls"] * (median - timing[1])
        comparable = context.comparable and pass_us > 0
        alt_row["saving_pct"] = 100 * alt_row["saving_us"] / pass_us if comparable else math.nan
        rows.append(alt_row)
    return rows


def _result(function: Callable, inputs: SampleInputs) -> tuple:
    """The call's result on fresh inputs, and the inputs after it (what an in-place call wrote)."""
    args, kwargs = inputs.make()
    out = function(*args, **kwargs)
    return out, args, kwargs


def _timed(row: dict, implementation: str, status: str, context: _Context, timing: tuple, reason=None) -> dict:
    fastest, median, slowest = timing
    ratio = median / row["recorded_us"] if context.comparable and row["recorded_us"] > 0 else math.nan
    return _done(row, implementation, status, reason=reason, replayed_us=median, min_us=fastest, max_us=slowest,
                 ratio=ratio)  # fmt: skip


def _done(row: dict, implementation: str, status: str, **values: Any) -> dict:
    return {**row, "implementation": implementation, "status": status, **values}
