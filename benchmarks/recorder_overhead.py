"""The recorder's overhead: one pass of each workload timed plain, under torch.profiler, and recorded.

The host's speed drifts by tens of percent over seconds, so the variants that matter are timed in pairs
inside one profiler session (kernelscope's profiler options): each iteration times, in rotating order,
  profiler*        one pass under the profiler alone (the baseline of the pairs)
  modules-only     one pass with kernelscope's module scopes alone (instrumented(functions=False))
  ks-unsampled     one recorded pass, calls="all", no samples collected (function_names=set())
  ks-functional    one recorded pass, calls="functional" (module + F namespace scopes, samples)
  ks-all           one recorded pass as profile() makes it (calls="all", every sample collected)
Every recorded pass gets a fresh CappedSampleBook and its own instrumented() block, and is made by
profile()'s own record_pass with profile()'s default warm-ups: two untimed passes with the scopes in place
(one keyed call by call, then a rehearsal of the recorded pass), then the timed pass, whose sample ids are
predicted from the keyed pass and whose held inputs are keyed and confirmed after the timer stops
(`sample_keys` says how each workload's passes were keyed). The profiler* pass also follows two untimed
passes (Python's first passes after the functions are patched or put back run slower: its call sites
re-specialize).
The ratio of a variant is the median over ITERATIONS (--iterations) of its
time over the profiler* time of the same iteration. For reference, ROUNDS interleaved sessions of PASSES
passes also time `plain` (no profiler) and `profiler` (torch.profiler with its default options, CPU+CUDA).

Per workload it also prints
  calls            intercepted calls of one pass: module forwards + scoped calls (counted by the book)
  no-scope         module forwards that get no scope (instrument.launches_no_kernel)
  folded           module forwards whose scope is folded into their one call's (instrument.folds_into_its_call)
  us/call          (ks-all - profiler*) / calls, medians: the instrumentation's cost per intercepted call
  kernel ratio     median over kernels of (duration recorded by kernelscope / duration under the plain
                   profiler), kernels matched by name and launch order in one pass of each

With --diagnose, two more recorded variants:
  ks-all-per-call   ks-all with a hold limit of 0: each call keyed as it is made, inside the timed pass (the
                    path of a recording without a warm-up, or whose inputs do not fit in the hold limit)
  ks-all-no-cap     ks-all without the memory cap (sample_memory_limit_mb=None)

Usage: python benchmarks/recorder_overhead.py [--json OUT] [--diagnose] [--iterations N] [--baseline-warm-ups N]
    [workload ...]   (CUDA, or the CPU's operators where there is none; see workloads.py)
    python benchmarks/recorder_overhead.py --json benchmarks/results/recorder_overhead_<machine>_<date>.json \\
        > benchmarks/results/recorder_overhead_<machine>_<date>.txt 2>&1

Prints each workload's measurements as a JSON line as it is done, then one table of all of them (ms of one pass,
ratios to profiler* in brackets, ks-all's p25-p75, the counts above); --json writes the same rows as a JSON list.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import orjson
import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
import workloads  # noqa: E402
from kernelscope.recorder import instrument  # noqa: E402
from kernelscope.recorder.instrument import instrumented  # noqa: E402
from kernelscope.recorder.profiler import (  # noqa: E402
    DEFAULT_SAMPLE_MEMORY_LIMIT_MB,
    hold_limit_bytes,
    profiler_options,
    record_pass,
)
from kernelscope.recorder.retention import CappedSampleBook  # noqa: E402

PASSES = 10
ROUNDS = 3
ITERATIONS = 30
ACTIVITIES = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def new_book() -> CappedSampleBook:
    return CappedSampleBook(int(DEFAULT_SAMPLE_MEMORY_LIMIT_MB * 2**20))


def timed_pass(w) -> float:
    synchronize()
    start = time.perf_counter()
    w.one_pass()
    synchronize()
    return 1e3 * (time.perf_counter() - start)


def session_medians(w) -> dict:
    """plain and torch.profiler (default options): median pass time over ROUNDS interleaved sessions."""
    factories = {"plain": ExitStack, "profiler": lambda: profile(activities=ACTIVITIES)}
    runs = {name: [] for name in factories}
    for _ in range(ROUNDS):
        for name, factory in factories.items():
            with torch.no_grad(), factory():
                runs[name].append(statistics.median(timed_pass(w) for _ in range(PASSES)))
    return {name: statistics.median(times) for name, times in runs.items()}


def paired_variants(w, diagnose: bool, sample_keys: set[str], baseline_warm_ups: int = 2) -> dict:
    """The timed variants; ``diagnose`` adds ks-all-per-call and ks-all-no-cap; ``sample_keys`` gets how each
    ks-all pass was keyed (record_pass)."""
    modules = list(w.module.named_modules())

    def recorded(calls, collect=None, modules_only=False, make_book=new_book, hold_limit=None, watched=False):
        def time_one() -> float:
            book = make_book()
            with instrumented(modules, book, collect, calls, functions=not modules_only):
                # profile()'s last warm-up pass, with the scopes in place, then the recorded pass keyed as there
                device = "cuda" if torch.cuda.is_available() else "cpu"
                limit = hold_limit_bytes(device, book) if hold_limit is None else hold_limit
                elapsed, keys, _ = record_pass(book, w.one_pass, lambda: timed_pass(w), limit, rehearsal=w.one_pass)
                if watched:
                    sample_keys.add(keys)
            book.clear()  # as profile() does before the next recording
            return elapsed

        return time_one

    def profiled() -> float:
        for _ in range(baseline_warm_ups):  # default 2: the passes before the timed one, as for the recorded pass
            w.one_pass()
        return timed_pass(w)

    return {
        "profiler*": profiled,
        "modules-only": recorded("functional", set(), modules_only=True),
        "ks-unsampled": recorded("all", set()),
        "ks-functional": recorded("functional"),
        "ks-all": recorded("all", watched=True),
        **(
            {
                "ks-all-per-call": recorded("all", hold_limit=0),
                "ks-all-no-cap": recorded("all", make_book=lambda: CappedSampleBook(None)),
            }
            if diagnose
            else {}
        ),
    }


def time_in_pairs(variants: dict, iterations: int) -> dict:
    """``{name: [ms, ...]}``: every variant timed once per iteration, in rotating order, inside one profiler
    session with kernelscope's options; then per variant after the first (the baseline) the median of its
    time over the baseline's in the same iteration (``<name>/<baseline>``) and that ratio's p25-p75."""
    names = list(variants)
    times = {name: [] for name in names}
    # A collection of the objects one variant leaves behind must not land in another's pass: collect between
    # passes, after freezing the process's existing objects so that each collection is short.
    gc.collect()
    gc.freeze()
    try:
        with torch.no_grad(), profile(activities=ACTIVITIES, **profiler_options()):
            for iteration in range(iterations):
                shift = iteration % len(names)
                for name in names[shift:] + names[:shift]:
                    gc.collect()
                    times[name].append(variants[name]())
    finally:
        gc.unfreeze()
    row = {name: statistics.median(values) for name, values in times.items()}
    base = times[names[0]]
    for name in names[1:]:
        ratios = sorted(t / b for t, b in zip(times[name], base, strict=True))
        row[f"{name}/{names[0]}"] = statistics.median(ratios)
        row[f"{name}/{names[0]} p25-p75"] = (ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4])
    return row


def paired_ratios(w, diagnose: bool, iterations: int = ITERATIONS, baseline_warm_ups: int = 2) -> dict:
    sample_keys: set[str] = set()
    row = time_in_pairs(paired_variants(w, diagnose, sample_keys, baseline_warm_ups), iterations)
    row["sample_keys"] = "/".join(sorted(sample_keys))
    return row


def intercepted_calls(w) -> tuple[int, int, int]:
    """(module forwards plus scoped calls, forwards without a scope, forwards folded into their call's scope) of
    one recorded pass (calls="all")."""
    forwards = [0]
    unscoped = [0]
    folded = [0]
    folding = {id(m) for _, m in w.module.named_modules() if instrument.folds_into_its_call(m)}

    def count(module, args):
        forwards[0] += 1
        unscoped[0] += instrument.launches_no_kernel(module)
        folded[0] += id(module) in folding

    book = new_book()
    handles = [m.register_forward_pre_hook(count) for _, m in w.module.named_modules()]
    try:
        with torch.no_grad(), instrumented(list(w.module.named_modules()), book, None, "all"):
            w.one_pass()
    finally:
        for handle in handles:
            handle.remove()
    return forwards[0] + sum(sum(counts) for counts in book.counts.values()), unscoped[0], folded[0]


def kernel_durations(w, recorded: bool) -> list[tuple[str, float]]:
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        path = Path(tmp) / "trace.json"
        with ExitStack() as stack:
            prof = stack.enter_context(profile(activities=ACTIVITIES, **(profiler_options() if recorded else {})))
            if recorded:
                stack.enter_context(instrumented(list(w.module.named_modules()), new_book(), None, "all"))
            w.one_pass()
            synchronize()
        prof.export_chrome_trace(str(path))
        events = orjson.loads(path.read_bytes())["traceEvents"]
    kernels = sorted((e["ts"], e["name"], e["dur"]) for e in events if e.get("cat") == "kernel" and e.get("ph") == "X")
    return [(name, dur) for _, name, dur in kernels]


def kernel_ratio(w) -> dict:
    base, recorded = kernel_durations(w, False), kernel_durations(w, True)
    pairs = [(b, r) for (bn, b), (rn, r) in zip(base, recorded, strict=False) if bn == rn and b > 0]
    same_order = len(base) == len(recorded) and len(pairs) == len(base)
    ratios = [r / b for b, r in pairs]
    return {
        "kernels": len(base),
        "kernels_matched": len(pairs),
        "same_kernels_in_order": same_order,
        "kernel_ratio_median": statistics.median(ratios) if ratios else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    parser.add_argument("--diagnose", action="store_true", help="add ks-all-per-call and ks-all-no-cap")
    parser.add_argument("--iterations", type=int, default=ITERATIONS, help="paired iterations per workload")
    parser.add_argument(
        "--baseline-warm-ups", type=int, default=2, help="untimed passes before each profiler* pass (default 2)"
    )
    parser.add_argument("workloads", nargs="*")
    options = parser.parse_args()
    rows = []
    for factory in workloads.ALL:
        if options.workloads and factory.__name__ not in options.workloads:
            continue
        w = factory()
        with torch.no_grad():
            for _ in range(3):
                w.one_pass()
        row = {
            "workload": w.name,
            **session_medians(w),
            **paired_ratios(w, options.diagnose, options.iterations, options.baseline_warm_ups),
        }
        row["calls"], row["no-scope"], row["folded"] = intercepted_calls(w)
        row["us/call"] = 1e3 * (row["ks-all"] - row["profiler*"]) / row["calls"]
        row.update(kernel_ratio(w))
        rows.append(row)
        print(json.dumps(row), flush=True)
    if options.json:
        options.json.write_text(json.dumps(rows, indent=1))
    import pandas as pd

    frame = pd.DataFrame(rows)
    shown = ["workload", "plain", "profiler", "profiler*"]
    diagnostic = ("ks-all-per-call", "ks-all-no-cap") if options.diagnose else ()
    for name in ("modules-only", "ks-unsampled", "ks-functional", "ks-all", *diagnostic):
        frame[name] = [f"{v:.3f} ({r:.2f}x)" for v, r in zip(frame[name], frame[f"{name}/profiler*"], strict=True)]
        shown.append(name)
    frame["ks-all p25-p75"] = [f"{a:.2f}-{b:.2f}" for a, b in frame["ks-all/profiler* p25-p75"]]
    shown += ["ks-all p25-p75", "sample_keys", "calls", "no-scope", "folded", "us/call"]
    shown += ["kernel_ratio_median", "same_kernels_in_order"]
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.precision", 3):
        print(frame[shown].to_string(index=False))


if __name__ == "__main__":
    main()
