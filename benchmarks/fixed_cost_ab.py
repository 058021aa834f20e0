"""A/B of analyzer trees on the fixed cost of small loads, the trees alternating process by process (the machine is
noisy): each child runs, after 3 untimed ones, LOADS of each target and reports its median CPU per call (process and
calling thread) and wall. The parent prints, per target and tree, the median over the rounds of those medians, and
each tree's ratio to the first tree. ``--one-process`` instead imports every tree's analyzer in this process (each
under a package name of its own) and alternates blocks of LOADS loads of a target, ROUNDS times: the calling
thread's CPU per load, median per tree (the same tree under two names, an A/A, measures the method's own bias).

    python benchmarks/fixed_cost_ab.py ROUNDS LOADS TARGET... -- NAME=PYTHONPATH ... [--out AB.json] [--one-process]

TARGET: a run directory or trace (``load_run`` + ``profiling_df`` + close), or ``profile:tiny`` (profile() of
workloads_small.tiny, warm-up 3, as profile_vs_aitune.py calls it) and ``plain:tiny`` (a plain ``torch.profiler`` pass
of it + ``export_chrome_trace``: issue 24's yardstick), both on one torch thread; ``--one-process`` takes runs and
traces only. PYTHONPATH
is a folder holding an installed ``kernelscope`` package, as for ingest_ab.py: the checkout's folders (cli/, analyzer/,
recorder/) are the package's parts only once installed, so ``git archive COMMIT | tar -x -C SRC``, then ``pip wheel
--no-deps --no-build-isolation -w WHL SRC`` and ``pip install --no-deps --target SITE WHL/*.whl`` make one (SITE).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, statistics, sys, time
loads, benchmarks, targets = int(sys.argv[1]), sys.argv[2], sys.argv[3:]

def call_of(target):
    if target in ("profile:tiny", "plain:tiny"):
        sys.path.insert(0, benchmarks)
        import torch
        torch.set_num_threads(1)
        from profile_vs_aitune import kernelscope_way, plain_way
        from workloads_small import tiny
        w, way = tiny(), kernelscope_way if target == "profile:tiny" else plain_way
        return lambda: way(w, 3)
    from kernelscope.analyzer import load_run
    def load():
        with load_run(target) as run:
            run.profiling_df()
    return load

result = {}
for target in targets:
    call = call_of(target)
    for _ in range(3):
        call()
    cpu, thread, wall = [], [], []
    for _ in range(loads):
        c, t, w = time.process_time(), time.thread_time(), time.perf_counter()
        call()
        cpu.append(time.process_time() - c); thread.append(time.thread_time() - t); wall.append(time.perf_counter() - w)
    result[target] = {k: statistics.median(v) * 1e3 for k, v in (("cpu", cpu), ("thread", thread), ("wall", wall))}
print(json.dumps(result))
"""


def in_one_process(trees: dict[str, str], target: str, rounds: int, loads: int) -> dict:
    """Each tree's analyzer imported here as package ``ks_ab_<NAME>``; blocks of ``loads`` loads of ``target``,
    alternating: the calling thread's CPU per load in ms, by tree, and its median, printed with the ratio."""
    import importlib
    import tempfile
    import time

    folder = tempfile.mkdtemp()
    sys.path.insert(0, folder)
    analyzers = {}
    for name, path in trees.items():
        os.symlink(os.path.join(os.path.abspath(path), "kernelscope"), os.path.join(folder, f"ks_ab_{name}"))
        analyzers[name] = importlib.import_module(f"ks_ab_{name}.analyzer")

    def load(analyzer) -> float:
        start = time.thread_time()
        with analyzer.load_run(target) as run:
            run.profiling_df()
        return (time.thread_time() - start) * 1e3

    for analyzer in analyzers.values():
        for _ in range(3):
            load(analyzer)
    spent: dict[str, list[float]] = {name: [] for name in trees}
    for index in range(rounds):
        for name in trees if index % 2 == 0 else reversed(list(trees)):
            spent[name] += [load(analyzers[name]) for _ in range(loads)]
    first = statistics.median(spent[next(iter(trees))])
    print(target)
    for name, times in spent.items():
        print(f"  {name:>10}: thread CPU {statistics.median(times):7.2f} ms ({statistics.median(times) / first:.3f}x)")
    return {name: {"median_ms": statistics.median(times), "loads_ms": times} for name, times in spent.items()}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        usage="%(prog)s ROUNDS LOADS TARGET... -- NAME=PYTHONPATH ... [--out AB.json] [--one-process]",
    )
    parser.add_argument("rounds", type=int)
    parser.add_argument("loads", type=int)
    parser.add_argument("targets", nargs="+")
    if "--" not in argv:
        parser.parse_args(argv)  # --help answered here
        parser.error("the trees come after --: NAME=PYTHONPATH ...")
    cut = argv.index("--")
    args = parser.parse_args(argv[:cut])
    rest = argv[cut + 1 :]
    out = None
    if "--out" in rest:
        at = rest.index("--out")
        out, rest = rest[at + 1], rest[:at] + rest[at + 2 :]
    one_process = "--one-process" in rest
    rest = [arg for arg in rest if arg != "--one-process"]
    trees = dict(tree.split("=", 1) for tree in rest)
    if one_process:
        report = {target: in_one_process(trees, target, args.rounds, args.loads) for target in args.targets}
        if out:
            with open(out, "w") as file:
                json.dump(report, file, indent=1)
        return
    targets = [os.path.abspath(t) if os.path.exists(t) else t for t in args.targets]  # the children run from /
    runs: dict[str, dict[str, list[dict]]] = {name: {t: [] for t in args.targets} for name in trees}
    for index in range(args.rounds):
        for name, path in trees.items() if index % 2 == 0 else reversed(trees.items()):
            env = dict(os.environ, PYTHONPATH=path)
            child = subprocess.run(
                [sys.executable, "-c", CHILD, str(args.loads), os.path.dirname(os.path.abspath(__file__)), *targets],
                env=env, capture_output=True, text=True, cwd="/",
            )  # fmt: skip
            if child.returncode:
                sys.exit(f"{name}: {child.stderr.strip()}")
            numbers = json.loads(child.stdout.strip().splitlines()[-1]).values()
            for target, measured in zip(args.targets, numbers, strict=True):
                runs[name][target].append(measured)
    first = next(iter(trees))
    report = {}
    for target in args.targets:
        print(target)
        for name in trees:
            median = {k: statistics.median(r[k] for r in runs[name][target]) for k in ("cpu", "thread", "wall")}
            base = {k: statistics.median(r[k] for r in runs[first][target]) for k in median}
            report.setdefault(target, {})[name] = {"median_ms": median, "rounds": runs[name][target]}
            print(
                f"  {name:>10}: process CPU {median['cpu']:7.2f} ms ({median['cpu'] / base['cpu']:.3f}x)"
                f"  thread CPU {median['thread']:7.2f} ms ({median['thread'] / base['thread']:.3f}x)"
                f"  wall {median['wall']:7.2f} ms ({median['wall'] / base['wall']:.3f}x)"
            )
    if out:
        with open(out, "w") as file:
            json.dump(report, file, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
