"""held.py's two ways to the spans that hold each launch point, A/B on one trace in one process: the native sweep
(_held.c) against the range join (held_by_sql.sql), alternating, with an A/A of the sweep for the spread.

Pinned to --cores cores with DuckDB's threads set to as many (analyzer_throughput.use_cores). Two measurements: the
step alone (held.hold_spans on one loaded trace, --rounds times each way, alternating), and whole loads (load_run
through the kernels table, --loads times each way, alternating). Prints the medians and minimums, and one JSON line.

    python benchmarks/held_ab.py TRACE [--cores 2] [--rounds 7] [--loads 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import analyzer_throughput  # noqa: E402

WAYS = ("sweep", "join", "sweep again")


def _summary(times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {way: {"median": round(statistics.median(t), 3), "min": round(min(t), 3)} for way, t in times.items() if t}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--loads", type=int, default=3)
    args = parser.parse_args(argv)
    analyzer_throughput.use_cores(args.cores)
    from kernelscope.analyzer import held, load_run, rank_parts

    native = held.native_sweep
    assert native is not None, "the native sweep is not built"
    step: dict[str, list[float]] = {way: [] for way in WAYS}
    original = rank_parts.hold_spans

    def timed_both_ways(con, **kwargs):
        for _ in range(args.rounds):
            for way in WAYS:
                start = time.perf_counter()
                original(con, native=way != "join")
                step[way].append(time.perf_counter() - start)

    rank_parts.hold_spans = timed_both_ways
    load_run(args.trace).close()
    rank_parts.hold_spans = original
    loads: dict[str, list[float]] = {way: [] for way in WAYS}
    for _ in range(args.loads):
        for way in WAYS:
            held.native_sweep = None if way == "join" else native
            start = time.perf_counter()
            load_run(args.trace).close()
            loads[way].append(time.perf_counter() - start)
    held.native_sweep = native
    result = {"trace": args.trace, "bytes": os.path.getsize(args.trace), "cores": args.cores}
    result.update(step=_summary(step), load=_summary(loads), load_average=os.getloadavg()[0])
    for kind in ("step", "load"):
        for way, seconds in result[kind].items():
            print(f"{kind:5} {way:12} median {seconds['median']:.3f} s, min {seconds['min']:.3f} s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
