"""Where the first profile() of a process spends its time: cProfile of it (cumulative), then the second one timed.

The mlp workload's model is run twice before, so the model's own first-call costs are not in it.

Usage (on a CUDA machine): python benchmarks/first_profile.py [OUTDIR]   (default: a temporary directory)

Prints the first profile()'s seconds, its cProfile sorted by cumulative time, then the second profile()'s seconds.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import workloads  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", nargs="?", default=None, help="where the two runs go (default: a temporary one)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("needs a CUDA device (the mlp workload, timed with torch.cuda.synchronize)")
    out = Path(args.outdir or tempfile.mkdtemp(prefix="first-profile-"))
    w = workloads.mlp()
    with torch.no_grad():
        w.one_pass()
        w.one_pass()
    torch.cuda.synchronize()
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    ModuleFunctionKernelProfiler().profile(w.fn, w.samples, module=w.module, warmup_iterations=3, out=out / "first")
    profiler.disable()
    print("first profile() s", time.perf_counter() - start)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(35)
    print(text.getvalue())
    start = time.perf_counter()
    ModuleFunctionKernelProfiler().profile(w.fn, w.samples, module=w.module, warmup_iterations=3, out=out / "second")
    print("second profile() s", time.perf_counter() - start)


if __name__ == "__main__":
    main()
