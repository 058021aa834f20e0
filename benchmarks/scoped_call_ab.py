"""What a scoped call costs on the CPU, A/B of recorder trees: one process per tree and round, the trees alternating
(the machine drifts and is shared), every time this thread's CPU time (``time.thread_time``: what other processes
take of the cores is not counted).

Each child, under torch.profiler with profile()'s options, times:

- ``pass_ns_per_scope``: a recorded pass as profile() makes it (recorder.profiler.record_pass: keyed warm-up,
  rehearsal, the predicted pass, every sample collected) of BLOCKS small blocks (a Linear, relu, an add, a LayerNorm,
  a 2-tuple result), paired in each iteration with a pass under the profiler alone after the same two passes:
  (recorded - profiled) / the scopes one recorded pass opens (``scopes``), and recorded / profiled (``pass_ratio``),
  the medians over ITERATIONS;
- the ns of one scoped call by its path, no samples collected (``collect=set()``), the minimum over REPEATS of CALLS
  calls, on a 4x32 tensor: a module forward returning a tensor (``module_tensor``) or a 2-tuple (``module_tuple``),
  a folded ``nn.ReLU`` (``folded_relu``), ``F.relu`` (``functional``), ``x + y`` (``tensor_add``, Tensor.__add__),
  ``torch.neg`` (``torch_call``) and ``torch.neg(input=x)`` (``torch_call_keyword``).

Usage: python benchmarks/scoped_call_ab.py ROUNDS -- NAME=CHECKOUT ...

A CHECKOUT is a kernelscope source tree (a git worktree of another commit: ``git worktree add /tmp/base 08d6043``);
the child imports it through a temporary folder of links laid out as the installed package (cli/ as ``kernelscope``,
recorder/ and analyzer/ inside it), so nothing is installed into it. Prints each child's JSON line as it comes, then
per metric and tree the minimum and median over rounds, and each tree's median over the first tree's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

BLOCKS, ITERATIONS, CALLS, REPEATS = 20, 60, 300, 100


def child() -> None:
    """The measurements of the tree that ``kernelscope`` imports from, as one JSON line."""
    import torch
    import torch.nn.functional as F  # noqa: N812
    from kernelscope.recorder.instrument import instrumented
    from kernelscope.recorder.profiler import hold_limit_bytes, profiler_options, record_pass
    from kernelscope.recorder.retention import CappedSampleBook
    from kernelscope.recorder.samples import SampleBook
    from module_forward_paths import Returns, ReturnsTwo
    from torch import nn
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    torch.set_num_threads(1)  # an operator on a few numbers gains nothing from a second thread, and waits on it

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc, self.norm = nn.Linear(32, 32), nn.LayerNorm(32)

        def forward(self, x):
            return self.norm(F.relu(self.fc(x)) + x), x

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))

        def forward(self, x):
            for block in self.blocks:
                x, _ = block(x)
            return x

    model, x = Model().eval(), torch.randn(4, 32)
    modules = list(model.named_modules())

    def timed_pass() -> float:
        start = time.thread_time()
        model(x)
        return time.thread_time() - start

    def recorded() -> float:
        book = CappedSampleBook(None)
        with instrumented(modules, book, None, "all"):
            limit = hold_limit_bytes("cpu", book)
            elapsed, keys, _ = record_pass(book, lambda: model(x), timed_pass, limit, rehearsal=lambda: model(x))
        assert keys == "predicted", keys
        return elapsed

    def profiled() -> float:
        model(x)
        model(x)
        return timed_pass()

    with profile(activities=[ProfilerActivity.CPU]) as counted:  # profile()'s options keep no events to count
        with torch.no_grad(), instrumented(modules, CappedSampleBook(None), set(), "all"):
            model(x)
    result: dict = {"scopes": sum(event.name.startswith("ks.") for event in counted.events())}
    per_scope, ratios = [], []
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], **profiler_options()):
        for index in range(ITERATIONS):
            first, second = (recorded, profiled) if index % 2 else (profiled, recorded)
            times = {first: first(), second: second()}
            per_scope.append((times[recorded] - times[profiled]) / result["scopes"] * 1e9)
            ratios.append(times[recorded] / times[profiled])
    result["pass_ns_per_scope"], result["pass_ratio"] = statistics.median(per_scope), statistics.median(ratios)

    relu, one, two, y = nn.ReLU(), Returns(), ReturnsTwo(), torch.randn(4, 32)
    paths = {
        "module_tensor": lambda: one(y),
        "module_tuple": lambda: two(y),
        "folded_relu": lambda: relu(y),
        "functional": lambda: F.relu(y),
        "tensor_add": lambda: y + y,
        "torch_call": lambda: torch.neg(y),
        "torch_call_keyword": lambda: torch.neg(input=y),
    }
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], **profiler_options()):
        with instrumented([("relu", relu), ("one", one), ("two", two)], SampleBook(), set(), "all"):
            for name, path in paths.items():
                seconds = timeit.repeat(path, number=CALLS, repeat=REPEATS, timer=time.thread_time)
                result[name] = min(seconds) / CALLS * 1e9
    print(json.dumps({key: round(value, 3 if key == "pass_ratio" else 1) for key, value in result.items()}), flush=True)


def linked_package(checkout: Path, into: Path) -> Path:
    """A folder holding ``kernelscope`` laid out as the installed package, of links into ``checkout``."""
    package = into / "kernelscope"
    package.mkdir(parents=True)
    for item in (checkout / "cli").iterdir():
        (package / item.name).symlink_to(item)
    for part in ("recorder", "analyzer"):
        (package / part).symlink_to(checkout / part)
    return into


def main(argv: list[str]) -> None:
    if argv == ["--child"]:
        child()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], usage="%(prog)s ROUNDS -- NAME=CHECKOUT ...")
    parser.add_argument("rounds", type=int)
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    trees = [item.split("=", 1) for item in argv[split + 1 :]]
    if not trees or any(len(tree) != 2 or not (Path(tree[1]) / "recorder").is_dir() for tree in trees):
        parser.error("name the checkouts to compare after '--', each as NAME=CHECKOUT (a folder holding recorder/)")
    results: dict[str, list[dict]] = {name: [] for name, _ in trees}
    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory() as scratch:
        paths = {name: linked_package(Path(tree).resolve(), Path(scratch) / name) for name, tree in trees}
        for _ in range(args.rounds):
            for name, _tree in trees:
                env = dict(os.environ, PYTHONPATH=f"{paths[name]}{os.pathsep}{here}")
                command = [sys.executable, str(here / "scoped_call_ab.py"), "--child"]
                done = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True)
                if done.returncode:
                    sys.exit(f"{name}: the child failed (exit {done.returncode}); its errors are above")
                results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(name, json.dumps(results[name][-1]), flush=True)
    first = trees[0][0]
    for metric in results[first][0]:
        medians = {name: statistics.median(row[metric] for row in rows) for name, rows in results.items()}
        for name, rows in results.items():
            ratio = medians[name] / medians[first] if medians[first] else float("nan")
            low = min(row[metric] for row in rows)
            print(f"{metric:19s} {name:10s} min {low:9.3f} median {medians[name]:9.3f}  x{ratio:.3f} of {first}")


if __name__ == "__main__":
    main(sys.argv[1:])
