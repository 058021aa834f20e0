"""What the recorded pass costs depending on the passes before it, and whether holding inputs costs.

Paired like recorder_overhead.py (one profiler session, rotating order, median of per-iteration ratios), each
recorded variant with calls="all" and a fresh CappedSampleBook:
  profiler*      the profiler alone, after one untimed pass
  unsampled      no samples (function_names=set()), after the keyed warm-up (record_pass)
  all            every sample, after the keyed warm-up: record_pass without a rehearsal
  all-nohold     as `all`, but the predicted pass holds no input (so nothing is confirmed: timing only)
  all-extra      one more patched pass (keyed per call, then reset) before the keyed warm-up
  all-rehearsed  record_pass with a rehearsal: keyed warm-up, a predicted pass not keyed, then the timed one

Usage: python benchmarks/warm_up_variants.py [--iterations N] workload ...   (CUDA; see workloads.py)

Prints one line per workload and variant: median ms of one pass, the median ratio to profiler* and its p25-p75.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import workloads  # noqa: E402
from kernelscope.recorder.instrument import instrumented  # noqa: E402
from kernelscope.recorder.profiler import record_pass  # noqa: E402
from kernelscope.recorder.retention import CappedSampleBook  # noqa: E402
from recorder_overhead import time_in_pairs, timed_pass  # noqa: E402


class HoldsNothing(CappedSampleBook):
    """The predicted pass holds no input (so nothing is confirmed: for timing only)."""

    def _start_predicting(self) -> None:
        for predicted in self._predicted:
            predicted.control.predict(predicted, lambda call: None, self.thread)
        self.predicting = True


def variants(w) -> dict:
    modules = list(w.module.named_modules())

    def recorded(collect=None, hold=True, extra=False, rehearse=False):
        def time_one() -> float:
            book = (CappedSampleBook if hold else HoldsNothing)(256 * 2**20)
            with instrumented(modules, book, collect, "all"):
                if extra:
                    w.one_pass()
                rehearsal = w.one_pass if rehearse else None
                elapsed, _, _ = record_pass(book, w.one_pass, lambda: timed_pass(w), None, rehearsal)
            book.clear()
            return elapsed

        return time_one

    def profiled() -> float:
        w.one_pass()
        return timed_pass(w)

    return {
        "profiler*": profiled,
        "unsampled": recorded(set()),
        "all": recorded(),
        "all-nohold": recorded(hold=False),
        "all-extra": recorded(extra=True),
        "all-rehearsed": recorded(rehearse=True),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=150)
    parser.add_argument("workloads", nargs="+")
    options = parser.parse_args()
    for name in options.workloads:
        w = getattr(workloads, name)()
        with torch.no_grad():
            for _ in range(3):
                w.one_pass()
        timed = variants(w)
        row = time_in_pairs(timed, options.iterations)
        row["profiler*/profiler*"], row["profiler*/profiler* p25-p75"] = 1.0, (1.0, 1.0)
        for variant in timed:
            low, high = row[f"{variant}/profiler* p25-p75"]
            print(
                f"{name} {variant:14s} {row[variant]:.4f} ms {row[f'{variant}/profiler*']:.3f}x ({low:.2f}-{high:.2f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
