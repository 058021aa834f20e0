"""What a scoped module's forward costs by the path it is reached: the instance path (``module(x)``, a forward
returning a tensor and one returning a 2-tuple, whose items are looked into for lazy results), ``super().forward(x)``
inside a scoped subclass (which opens no scope of its own), and a parent calling its child as ``self.child(x)`` or
through the child's class (``Returns.forward(self.child, x)``, which opens the child's scope:
recorder/class_forwards.py), under instrumented() and an active torch.profiler (CPU), every scope open.

Usage: python benchmarks/module_forward_paths.py LABEL [--rounds N]

Prints one line per round: LABEL and the ns per call of each path (the minimum of 7 repeats of 20000 calls). The
host's speed drifts, so compare trees by alternating them round by round and taking each one's minimum.
"""

from __future__ import annotations

import argparse
import timeit

import torch
from kernelscope.recorder.instrument import instrumented
from kernelscope.recorder.samples import SampleBook
from torch import nn
from torch.profiler import ProfilerActivity, profile

CALLS, REPEATS = 20000, 7


class Returns(nn.Module):
    def forward(self, x):
        return x


class ReturnsTwo(nn.Module):
    def forward(self, x):
        return x, x


class CallsSuper(Returns):
    def forward(self, x):
        return super().forward(x)


class CallsItsChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = Returns()

    def forward(self, x):
        return self.child(x)


class CallsItsChildsClass(CallsItsChild):
    def forward(self, x):
        return Returns.forward(self.child, x)


class Root(nn.Module):
    def __init__(self):
        super().__init__()
        self.one, self.two, self.sub = Returns(), ReturnsTwo(), CallsSuper()
        self.parent, self.class_parent = CallsItsChild(), CallsItsChildsClass()

    def forward(self, x):
        return x


def one_round() -> dict[str, float]:
    root, x = Root(), torch.ones(1)
    one, two, sub, parent, class_parent = root.one, root.two, root.sub, root.parent, root.class_parent
    paths = {
        "tensor": lambda: one(x),
        "tuple": lambda: two(x),
        "super": lambda: sub(x),
        "parent_calls_child": lambda: parent(x),
        "parent_calls_childs_class": lambda: class_parent(x),
    }
    with instrumented(list(root.named_modules()), SampleBook(), set()), profile(activities=[ProfilerActivity.CPU]):
        timed = {name: min(timeit.repeat(path, number=CALLS, repeat=REPEATS)) for name, path in paths.items()}
    return {name: seconds / CALLS * 1e9 for name, seconds in timed.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("label")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    for _ in range(args.rounds):
        print(args.label, " ".join(f"{name}={ns:.0f}ns" for name, ns in one_round().items()), flush=True)


if __name__ == "__main__":
    main()
