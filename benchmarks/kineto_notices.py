"""How long the recorder holds stderr while the profiler starts and stops (recorder/kineto_notices.py), and that
no libkineto USDT notice gets through: the window in which a line written to stderr by another thread is held
back (never lost) until the profiler has started or stopped.

Usage: python benchmarks/kineto_notices.py [WORKLOAD ...]   (benchmarks/workloads.py names, default: demo mlp;
on a machine without CUDA the demo model on the CPU, once per name)
Prints one JSON line per workload: the start and stop windows in ms, the whole profile() in s, whether stderr
held a USDT line; exits 1 if one did.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, sys, tempfile, time
import torch
sys.path.insert(0, {benchmarks!r})
import workloads
from kernelscope.recorder import ModuleFunctionKernelProfiler, kineto_notices

windows = []
held = kineto_notices.notices_dropped


class Timed:
    def __enter__(self):
        self.inner, self.began = held(), time.perf_counter()
        return self.inner.__enter__()

    def __exit__(self, *exc):
        try:
            return self.inner.__exit__(*exc)
        finally:
            windows.append(1000 * (time.perf_counter() - self.began))


kineto_notices.notices_dropped = Timed
if torch.cuda.is_available():
    work = getattr(workloads, {name!r})()
    fn, samples, module = work.fn, work.samples, work.module
else:  # the workloads are CUDA ones: the demo model on the CPU stands in
    from kernelscope.demo import demo_workload

    fn, samples = demo_workload()
    module = fn
began = time.perf_counter()
ModuleFunctionKernelProfiler().profile(fn, samples, module=module, warmup_iterations=3, out=tempfile.mkdtemp() + "/run")
print(json.dumps({{"workload": {name!r}, "start_ms": windows[0], "stop_ms": windows[1],
                  "profile_s": time.perf_counter() - began}}))
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "workloads",
        nargs="*",
        metavar="WORKLOAD",
        default=["demo", "mlp"],
        help="benchmarks/workloads.py names (default: demo mlp)",
    )
    args = parser.parse_args(argv)
    benchmarks = str(Path(__file__).parent)
    failed = False
    for name in args.workloads:
        done = subprocess.run(
            [sys.executable, "-c", CHILD.format(benchmarks=benchmarks, name=name)], capture_output=True, text=True
        )
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            sys.exit(done.returncode)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["usdt_on_stderr"] = "USDT:" in done.stderr
        failed |= result["usdt_on_stderr"]
        print(json.dumps(result))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
