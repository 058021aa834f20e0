"""profile() end to end, step by step, as the recorded pass grows: no step may grow faster than the trace.

The demo model's two samples are repeated to make passes of 2, 8, 32 and 128 calls of the model; for each,
profile() (warmup 3) is timed whole and by step, by timers put around the recorder's own functions:
  passes       the warm-up and recorded passes (the model's work, what the other steps are compared to)
  scopes       instrumented(): patching and unpatching
  write        write_run(): the profiler's trace export, gzip, samples.json/.pt, manifest
  analysis     load_run() of the written run directory
  other        the rest: the profiler's start and stop, keying the samples held in the recorded pass,
               the in-process profiling_df
Each step is printed in ms and in µs per trace event; flat µs per event means linear growth.
Best of REPEAT runs per size.

Usage: python benchmarks/profile_scaling.py   (CUDA where there is CUDA, else the CPU)

Prints the device and torch version, then one line per size: calls, trace events, and each step's ms with its µs
per event in brackets.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections import defaultdict
from contextlib import contextmanager
from unittest import mock

import torch
from kernelscope.demo import demo_workload
from kernelscope.recorder import ModuleFunctionKernelProfiler, profiler
from kernelscope.recorder import instrument as instrument_module

SIZES = (2, 8, 32, 128)
REPEAT = 3


def timed(steps: dict, step: str, function):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            steps[step] += time.perf_counter() - start

    return wrapper


def timed_context(steps: dict, step: str, manager):
    @contextmanager
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        with manager(*args, **kwargs):
            steps[step] += time.perf_counter() - start
            yield
            start = time.perf_counter()
        steps[step] += time.perf_counter() - start

    return wrapper


def one_profile(model, samples) -> tuple[dict, int]:
    steps: dict = defaultdict(float)
    with (
        mock.patch.object(profiler, "_run_pass", timed(steps, "passes", profiler._run_pass)),
        mock.patch.object(profiler, "instrumented", timed_context(steps, "scopes", instrument_module.instrumented)),
        mock.patch.object(profiler, "write_run", timed(steps, "write", profiler.write_run)),
        mock.patch.object(profiler, "load_run", timed(steps, "analysis", profiler.load_run)),
    ):
        recorder = ModuleFunctionKernelProfiler()
        start = time.perf_counter()
        recorder.profile(model, samples, warmup_iterations=3)
        steps["total"] = time.perf_counter() - start
    with gzip.open(recorder.run_dir / "trace.json.gz", "rb") as trace:
        events = len(json.load(trace)["traceEvents"])
    recorder.release()
    steps["other"] = steps["total"] - sum(v for k, v in steps.items() if k != "total")
    return dict(steps), events


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)  # no options; --help
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, two = demo_workload(device, torch.float16 if device == "cuda" else torch.float32)
    one_profile(model, two)  # imports, first connection
    names = ("passes", "scopes", "write", "analysis", "other", "total")
    print(f"device {device}, torch {torch.__version__}; ms, and µs per trace event in brackets")
    print(f"{'calls':>5} {'events':>7} " + " ".join(f"{name:>17}" for name in names))
    for size in SIZES:
        samples = two * (size // 2)
        runs = [one_profile(model, samples) for _ in range(REPEAT)]
        steps, events = min(runs, key=lambda run: run[0]["total"])
        cells = " ".join(f"{1e3 * steps[n]:8.1f} ({1e6 * steps[n] / events:5.2f})" for n in names)
        print(f"{size:5d} {events:7d} {cells}", flush=True)


if __name__ == "__main__":
    main()
