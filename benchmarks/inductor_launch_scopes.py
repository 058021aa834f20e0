"""What naming an inductor kernel's launch costs the recorded pass, per launch (recorder/inductor_kernels.py): the
scopes of its source nodes read in the graph its compiled function noted as running (``_resolved``), against fixed
scopes (the same names, no lookup) and those fixed scopes again (A/A), alternating in one process. The profiler's
scopes are replaced by a no-op, so only the recorder's Python is timed; one graph call's noting (a frame read and a
ContextVar set, once per graph) is not in it.

Usage: python benchmarks/inductor_launch_scopes.py [rounds]   (default 15; prints ns per launch, medians of the rounds)
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from kernelscope.recorder import inductor_kernels

LAUNCHES = 20000


class _NoScope:
    def __init__(self, name: str) -> None:
        pass

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        pass


def _per_launch() -> float:
    kernel = tuple
    start = time.perf_counter()
    for _ in range(LAUNCHES):
        inductor_kernels._in_scopes(("linear",), kernel, (), {})
    return (time.perf_counter() - start) / LAUNCHES * 1e9


def main(rounds: int) -> None:
    root = torch.nn.Module()
    root.fc = torch.nn.Linear(2, 2)
    inductor_kernels._Scope, inductor_kernels._recorded = _NoScope, lambda: True
    inductor_kernels.COMPILED_MODULE_SCOPE.set(("ks.module:_orig_mod", root))
    nodes = {"linear": ("self", "fc", "linear")}
    inductor_kernels._RUNNING.set((nodes, {"self": root}, (id(nodes), id(root))))  # as a graph call notes it
    resolved = inductor_kernels._resolved
    arms = {"running graph": resolved, "fixed scopes": lambda origins, root: ("fc", "linear")}
    arms["fixed scopes (A/A)"] = arms["fixed scopes"]
    times: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(rounds):
        for name, arm in arms.items():
            inductor_kernels._resolved = arm
            times[name].append(_per_launch())
    inductor_kernels._resolved = resolved
    base = statistics.median(times["fixed scopes"])
    for name, values in times.items():
        print(f"{name}: {statistics.median(values):.0f} ns per launch ({statistics.median(values) / base:.2f}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rounds", type=int, nargs="?", default=15, help="rounds of each arm (default 15)")
    main(parser.parse_args().rounds)
