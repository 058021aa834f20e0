"""A/B of analyzer trees on one or more traces, one load per process, the trees alternating (the machine is noisy):
wall, CPU (all threads) and peak RSS (os.wait4) of each child, then min and median per trace and tree.

    python benchmarks/ingest_ab.py ROUNDS MODE TRACE... -- NAME=PYTHONPATH ...

MODE: ``load`` (load_run, through the kernels table), ``ingest`` (the connection, its memory settings and
ingest_trace alone) or ``cut`` (split_event_array alone, each part dropped as it comes: decompressing and cutting,
with the cutting thread's own CPU). PYTHONPATH is a folder holding an installed ``kernelscope`` package (made as
fixed_cost_ab.py says: a wheel of the tree installed with ``pip install --target``). KS_THREADS=N sets DuckDB's
threads for ``ingest`` (the memory that many threads hold, on any machine), or the decoders for ``cut``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, resource, sys, tempfile, time
from pathlib import Path
mode, path = sys.argv[1], Path(sys.argv[2])
from kernelscope.analyzer import connection, load_run
from kernelscope.analyzer.event_array import is_gzip, split_event_array
from kernelscope.analyzer.ingest import ingest_trace
from kernelscope.analyzer.memory import default_memory_limit, json_bytes, limit_memory
from kernelscope.analyzer.run_settings import limit_threads
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
threads = os.environ.get("KS_THREADS")
result = {}
start, used, own = time.perf_counter(), cpu(), time.thread_time()
if mode == "load":
    run = load_run(path)
elif mode == "ingest":
    con = connection.connect()
    size = json_bytes(path, is_gzip(path))
    limit_memory(con, default_memory_limit(size), size)
    limit_threads(con, size, connection.made_settings(con).threads)
    if threads:
        con.execute(f"SET threads = {threads}")
    ingest_trace(con, path)
else:
    parts = []
    extra = {"threads": int(threads)} if threads else {}
    with tempfile.TemporaryDirectory() as scratch:
        split_event_array(path, scratch, compressed=is_gzip(path), part_bytes=32 << 20,
                          on_part=lambda i, part: parts.append(i) or part.drop_data(), advance=lambda *a: None,
                          in_place=True, **extra)
    result.update(parts=len(parts), cutting_thread_cpu=round(time.thread_time() - own, 3))
result.update(wall=round(time.perf_counter() - start, 3), cpu=round(cpu() - used, 3))
print(json.dumps(result), flush=True)
os._exit(0)
"""


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], usage="%(prog)s ROUNDS MODE TRACE... -- NAME=PYTHONPATH ..."
    )
    parser.add_argument("rounds", type=int)
    parser.add_argument("mode", choices=("load", "ingest", "cut"))
    parser.add_argument("traces", nargs="+", metavar="TRACE")
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    trees = [a.split("=", 1) for a in argv[split + 1 :]]
    if not trees or any(len(tree) != 2 for tree in trees):
        parser.error("name the trees to compare after '--', each as NAME=PYTHONPATH")
    rounds, mode, traces = args.rounds, args.mode, args.traces
    results: dict[tuple[str, str], list[dict]] = {}
    for round_ in range(rounds):
        for trace in traces:
            for name, pythonpath in trees:
                env = dict(os.environ, PYTHONPATH=pythonpath)
                child = subprocess.Popen([sys.executable, "-c", CHILD, mode, trace], stdout=subprocess.PIPE, env=env)
                out = child.stdout.read()
                _, status, usage = os.wait4(child.pid, 0)
                if status:
                    print(f"{round_} {trace} {name}: failed ({status})", flush=True)
                    continue
                measured = json.loads(out)
                measured.update(rss_mib=round(usage.ru_maxrss / 1024), rss_of_json=None, load=os.getloadavg()[0])
                size = os.path.getsize(trace)
                if not trace.endswith(".gz"):
                    measured["rss_of_json"] = round(usage.ru_maxrss * 1024 / size, 3)
                results.setdefault((os.path.basename(trace), name), []).append(measured)
                print(round_, os.path.basename(trace), name, json.dumps(measured), flush=True)
    print("summary: trace, tree, wall min / median, CPU min / median, peak RSS MiB")
    for (trace, name), runs in results.items():
        wall, cpu = sorted(r["wall"] for r in runs), sorted(r["cpu"] for r in runs)
        rss = [r["rss_mib"] for r in runs]
        print(
            f"{trace} {name}: wall {wall[0]} / {wall[len(wall) // 2]}  CPU {cpu[0]} / {cpu[len(cpu) // 2]}"
            f"  RSS {min(rss)}-{max(rss)}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
