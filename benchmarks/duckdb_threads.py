"""load_run's time against DuckDB's thread count: whether a small trace loads faster on fewer threads than DuckDB's
default of one per core (each statement's pipelines are scheduled on every thread, whatever the table's size), and
what kernelscope's own rule (analyzer/run_settings.py: one thread per 8 MB of JSON) gives.

The demo model is recorded first (CUDA where there is CUDA; torch needed for that step only) and its profile() is
timed per setting too; then each trace given. Settings run in interleaved rounds in one process, ``--loads`` loads
each per round; printed per trace and setting: the best and the median load in ms and the best's ratio to DuckDB's
default.

    python benchmarks/duckdb_threads.py [TRACE...] [--scaled 10MB,100MB] [--threads 1,2,4,0] [--rounds 5] [--loads 5]

``0`` is DuckDB's default (the machine's cores); the rule is always timed too, printed as threads "rule".
``--scaled`` also times the sample gpt2 trace scaled to each size (scale_trace.py, written to a scratch folder).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
from kernelscope.analyzer import load_run
from kernelscope.analyzer import run as run_module

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import scale_trace  # noqa: E402

DEFAULT_THREADS = int(duckdb.connect().execute("SELECT current_setting('threads')").fetchone()[0])


RULE = 0  # the count that stands for kernelscope's own rule


class Threads:
    """Each run's DuckDB thread count: ``count``, in place of the thread rule of analyzer/run_settings.py unless it
    is RULE (the setting is global to the instance, so each run sets it again, as the rule does)."""

    def __init__(self) -> None:
        self.count = DEFAULT_THREADS
        self._rule = run_module.limit_threads
        run_module.limit_threads = self.limit

    def limit(self, con, json_size: int, default: int, now: int | None = None) -> None:
        if self.count == RULE:
            self._rule(con, json_size, default, now)
        else:
            con.execute(f"SET threads = {self.count}")


def timed_rounds(setting: Threads, counts: list[int], rounds: int, loads: int, work) -> dict[int, list[float]]:
    seconds: dict[int, list[float]] = {count: [] for count in counts}
    for _ in range(rounds):
        for count in counts:
            setting.count = count
            work()  # the first load of a setting warms what it changed
            for _ in range(loads):
                start = time.perf_counter()
                work()
                seconds[count].append(time.perf_counter() - start)
    return seconds


def report(label: str, seconds: dict[int, list[float]]) -> None:
    base = min(seconds[DEFAULT_THREADS])
    for count, times in seconds.items():
        print(
            f"{label:34s} threads {'rule' if count == RULE else count:>4}  best {min(times) * 1e3:8.1f} ms  median "
            f"{statistics.median(times) * 1e3:8.1f} ms  {min(times) / base:5.2f}x the default"
        )


def load(path: Path):
    def work():
        run = load_run(path)
        run.profiling_df()
        run.close()

    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--scaled", default="", help="sizes to scale sample_traces/gpt2 to (10MB,100MB)")
    parser.add_argument("--threads", default="1,2,4,0")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--no-demo", action="store_true", help="skip recording the demo model (no torch needed)")
    args = parser.parse_args()
    counts = list(dict.fromkeys(int(c) or DEFAULT_THREADS for c in args.threads.split(",")))
    if DEFAULT_THREADS not in counts:
        counts.append(DEFAULT_THREADS)
    counts.append(RULE)
    setting = Threads()
    print(f"DuckDB {duckdb.__version__}, default threads {DEFAULT_THREADS}")
    with tempfile.TemporaryDirectory() as scratch:
        traces = list(args.traces)
        for size in filter(None, args.scaled.split(",")):
            source = HERE.parent / "sample_traces" / "gpt2"
            copies = scale_trace.ScaledTrace(scale_trace.load_trace(source)).copies_for(scale_trace.parse_size(size))
            traces.append(Path(scratch) / f"gpt2-{size}.json")
            scale_trace.write_scaled(source, traces[-1], copies=copies)
        if not args.no_demo:
            import torch
            from kernelscope.demo import demo_workload
            from kernelscope.recorder import ModuleFunctionKernelProfiler

            device = "cuda" if torch.cuda.is_available() else "cpu"
            model, samples = demo_workload(device)
            profiler = ModuleFunctionKernelProfiler()
            profiler.profile(model, samples, warmup_iterations=3, out=Path(scratch) / "demo")
            print(f"torch {torch.__version__} on {device}")

            def profile():
                profiler.profile(model, samples, warmup_iterations=3)

            report("demo profile()", timed_rounds(setting, counts, args.rounds, args.loads, profile))
            traces.insert(0, Path(scratch) / "demo")
        for trace in traces:
            label = f"{trace.name} load_run"
            report(label, timed_rounds(setting, counts, args.rounds, args.loads, load(trace)))


if __name__ == "__main__":
    main()
