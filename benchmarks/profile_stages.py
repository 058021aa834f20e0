"""Where a whole profile()'s wall time goes, stage by stage, on profile_vs_aitune.py's workloads: timers put around
the recorder's steps (the patched passes with the recorded pass, writing the run directory, load_run, the in-process
frame, function_data, release), and inside load_run the analyzer's (load_stages.py). What they leave is "other":
the unpatched warm-ups, the manifest, the threads started and awaited.

    python benchmarks/profile_stages.py [--device cuda] [--workloads tiny,demo] [--repeat 10] [--out STAGES.json]

Prints, per workload, each stage's median seconds and share of the median profile(), after two untimed calls (the
process's first-call costs are profile_vs_aitune.py's business).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent


@contextmanager
def recorder_timers(seconds: dict[str, float]):
    """Time the recorder's steps into ``seconds`` (stage -> wall seconds, added up) while inside."""
    from kernelscope.recorder import profiler, samples
    from profile_scaling import timed

    undo = []

    def wrap(owner, name: str, stage: str) -> None:
        original = getattr(owner, name)
        setattr(owner, name, timed(seconds, stage, original))
        undo.append((owner, name, original))

    wrap(profiler, "record_keeping_compiled_code", "patched passes (recorded pass in)")
    wrap(profiler, "write_run", "write the run directory")
    wrap(profiler, "load_run", "load_run")
    wrap(profiler.ModuleFunctionKernelProfiler, "_in_process_frame", "in-process frame")
    wrap(samples.SampleBook, "function_data", "function_data")
    wrap(profiler.ModuleFunctionKernelProfiler, "release", "release")
    try:
        yield
    finally:
        for owner, name, original in reversed(undo):
            setattr(owner, name, original)


def timed_profiles(w, warmup: int, repeat: int) -> dict[str, list[float]]:
    """Stage -> seconds of each of ``repeat`` profile() calls of workload ``w`` (its whole time as "profile()")."""
    import load_stages
    import torch
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    runs: dict[str, list[float]] = defaultdict(list)
    for index in range(repeat + 2):
        seconds: dict[str, float] = defaultdict(float)
        with recorder_timers(seconds), load_stages.timed() as stages:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            start = time.perf_counter()
            profiler = ModuleFunctionKernelProfiler()
            profiler.profile(w.fn, w.samples, module=w.module, warmup_iterations=warmup)
            profiler.release()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            whole = time.perf_counter() - start
        if index < 2:
            continue  # untimed: first-call costs
        runs["profile()"].append(whole)
        for stage, value in seconds.items():
            runs[stage].append(value)
        for stage, value in stages.as_dict(total=seconds["load_run"])["wall"].items():
            runs[f"  load_run/{stage}"].append(value)
        runs["other"].append(whole - sum(v for k, v in seconds.items()))
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--workloads", default=None, help="comma-separated names of profile_vs_aitune's (default: all of the device's)"
    )
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", default=None, help="write every timing as JSON here")
    args = parser.parse_args(argv)
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before torch: benchmarks/workload.py picks the device from it
    sys.path.insert(0, str(HERE))
    import torch
    import workloads_small

    factories = workloads_small.for_device(args.device)
    names = args.workloads.split(",") if args.workloads else list(factories)
    unknown = [name for name in names if name not in factories]
    if unknown:  # before any timing: a typo found after minutes of profiles wastes them
        parser.error(f"no workload {', '.join(unknown)} on {args.device}; known: {', '.join(factories)}")
    print(f"device {args.device}, torch {torch.__version__}, {args.repeat} profile() calls per workload, median")
    results = {}
    for name in names:
        runs = timed_profiles(factories[name](), args.warmup, args.repeat)
        medians = {stage: statistics.median(values) for stage, values in runs.items()}
        results[name] = {"median_s": medians, "times_s": runs}
        print(f"{name}: profile() {medians['profile()'] * 1000:.1f} ms")
        for stage, value in medians.items():
            if stage != "profile()":
                print(f"  {stage:<62}{value * 1000:8.2f} ms {value / medians['profile()']:6.1%}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": args.device, "torch": torch.__version__, **results}, indent=2))


if __name__ == "__main__":
    main()
