"""Where the recorder's overhead goes: one pass of each workload timed under variants, side by side.

Variants, interleaved over ROUNDS rounds so that drifts of the host's speed hit all of them alike
(median over rounds of the median wall time of one pass over PASSES passes, CUDA synchronized):
  plain            no profiler
  profiler         torch.profiler (CPU+CUDA), the baseline
  profiler+cfg     the same with kernelscope's experimental config (profile_all_threads, trace_only)
  mode-only        the baseline plus an empty TorchFunctionMode (the cost of dispatching to Python)
  ks-functional    kernelscope's recorded pass, calls="functional" (module + F namespace scopes)
  ks-all           kernelscope's recorded pass, calls="all" (the default: plus torch-level calls, stored
                   references, graph replays)

Usage: python benchmarks/recorder_overhead.py [workload ...]   (CUDA machine; see workloads.py)
"""

from __future__ import annotations

import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
import workloads  # noqa: E402
from kernelscope.recorder.instrument import instrumented  # noqa: E402
from kernelscope.recorder.profiler import experimental_config  # noqa: E402
from kernelscope.recorder.samples import SampleBook  # noqa: E402

PASSES = 10
ROUNDS = 5
ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.CUDA]


class EmptyMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def one_pass(w):
    if w.samples is None:
        w.fn()
        return
    for args, kwargs in w.samples:
        w.fn(*args, **kwargs)


def variants(w):
    modules = list(w.module.named_modules())

    def plain(stack):
        pass

    def profiler(stack):
        stack.enter_context(profile(activities=ACTIVITIES))

    def profiler_cfg(stack):
        stack.enter_context(profile(activities=ACTIVITIES, experimental_config=experimental_config()))

    def mode_only(stack):
        stack.enter_context(profile(activities=ACTIVITIES))
        stack.enter_context(EmptyMode())

    def ks(calls, config):
        def enter(stack):
            stack.enter_context(profile(activities=ACTIVITIES, experimental_config=config()))
            stack.enter_context(instrumented(modules, SampleBook(), None, calls))

        return enter

    return {
        "plain": plain,
        "profiler": profiler,
        "profiler+cfg": profiler_cfg,
        "mode-only": mode_only,
        "ks-functional": ks("functional", experimental_config),
        "ks-all": ks("all", experimental_config),
    }


def median_pass_ms(w, enter) -> float:
    times = []
    with torch.no_grad(), ExitStack() as stack:
        enter(stack)
        for _ in range(PASSES):
            torch.cuda.synchronize()
            start = time.perf_counter()
            one_pass(w)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main() -> None:
    wanted = set(sys.argv[1:])
    rows = []
    for factory in workloads.ALL:
        if wanted and factory.__name__ not in wanted:
            continue
        w = factory()
        with torch.no_grad():
            for _ in range(3):
                one_pass(w)
        row = {"workload": w.name}
        runs = {name: [] for name in variants(w)}
        for _ in range(ROUNDS):
            for name, enter in variants(w).items():
                runs[name].append(median_pass_ms(w, enter))
        row.update({name: statistics.median(times) for name, times in runs.items()})
        base = row["profiler"]
        row.update({f"{k}/profiler": row[k] / base for k in list(row) if k not in ("workload", "profiler")})
        rows.append(row)
        print(row, flush=True)
    import pandas as pd

    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.precision", 3):
        print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
