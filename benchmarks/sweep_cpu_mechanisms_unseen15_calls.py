"""Programs for cpu_sweep.py, beside sweep_cpu_mechanisms_unseen15.py's compiled ones: forwards and calls of
unusual shapes, each stating what a user expects of its rows (``modules``, ``calls``): ``torch.vmap`` of a child inside
a forward, forwards that are a ``functools.partialmethod``, a class-level lambda or a staticmethod lambda, children
reached through ``map``/``functools.reduce`` over a ModuleDict, ``weakref.proxy`` and ``type(child).__call__``, a
ParameterList iterated into ``F.linear``, a child run by one child's thread and joined by another, a ``contextmanager``
helper that runs a child.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import _w
from sweep_cpu_mechanisms_unseen15 import TwoMlps
from torch import nn

# --- forwards and calls of unusual shapes -------------------------------------------------------------------------


class VmapsChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = TwoMlps()

    def forward(self, x):
        return torch.vmap(self.cell, in_dims=1, out_dims=1)(x.view(4, 2, 8).repeat(1, 1, 2))


def vmap_child_in_forward():
    return _w("vmap_child_in_forward", VmapsChild().eval(), description="torch.vmap over a child's call inside the "
              "forward (in_dims=1)", modules={"linear": {"cell.a", "cell.b"}, "gelu": {"cell"}})  # fmt: skip


class PartialMethodForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def _run(self, x, scale):
        return F.hardswish(self.fc(x)) * scale

    forward = functools.partialmethod(_run, scale=2.0)


class LambdaForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    forward = lambda self, x: F.mish(self.fc(x))  # noqa: E731


class StaticLambdaForward(nn.Module):
    forward = staticmethod(lambda x: F.softsign(x) + 1)


class OddForwards(nn.Module):
    def __init__(self):
        super().__init__()
        self.partial, self.lam, self.static = PartialMethodForward(), LambdaForward(), StaticLambdaForward()

    def forward(self, x):
        return self.static(self.lam(self.partial(x)))


def forward_partialmethod_lambda():
    return _w("forward_partialmethod_lambda", OddForwards().eval(), description="children whose forward is a "
              "functools.partialmethod, a class-level lambda and a staticmethod lambda",
              modules={"hardswish": {"partial"}, "mish": {"lam"}, "softsign": {"static"},
                       "linear": {"partial.fc", "lam.fc"}})  # fmt: skip


class ReducedHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({name: nn.Linear(16, 16) for name in ("q", "k", "v")})
        self.gate = nn.Linear(16, 16)

    def forward(self, x):
        total = sum(map(lambda head: head(x), self.heads.values()))  # noqa: C417
        proxy = weakref.proxy(self.gate)
        gated = functools.reduce(lambda y, m: type(m).__call__(m, y), [proxy, self.heads["q"]], total)
        return F.tanh(gated)


def children_through_map_reduce():
    return _w("children_through_map_reduce", ReducedHeads().eval(), description="a ModuleDict's children called "
              "through map and functools.reduce, one through a weakref.proxy, one through type(child).__call__",
              modules={"linear": {"heads.q", "heads.k", "heads.v", "gate"}, "tanh": {""}},
              calls={"linear": 5})  # fmt: skip


class ParameterListLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(torch.randn(16, 16) / 4) for _ in range(3)])
        self.scales = nn.ParameterDict({"a": nn.Parameter(torch.ones(16)), "b": nn.Parameter(torch.ones(16) * 2)})

    def forward(self, x):
        for weight in self.weights:
            x = F.elu(F.linear(x, weight))
        return x * self.scales["a"] + self.scales["b"]


def parameter_list_linear():
    return _w("parameter_list_linear", ParameterListLinear().eval(), description="a ParameterList iterated into "
              "F.linear and a ParameterDict read in the forward", modules={"linear": {""}, "elu": {""}},
              calls={"linear": 3, "elu": 3})  # fmt: skip


class Starter(nn.Module):
    def __init__(self, worker):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.__dict__["worker"] = worker

    def forward(self, x, box):
        y = self.fc(x)

        def work():
            try:
                box["out"] = self.worker(y)
            except BaseException as exc:  # noqa: BLE001 - raised again by the joiner
                box["raised"] = exc

        box["thread"] = threading.Thread(target=work)
        box["thread"].start()
        return y


class Joiner(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, y, box):
        box["thread"].join()
        if "raised" in box:
            raise box["raised"]
        return self.fc(box["out"] + y)


class ThreadHandoff(nn.Module):
    def __init__(self):
        super().__init__()
        self.worker = TwoMlps()
        self.starter, self.joiner = Starter(self.worker), Joiner()

    def forward(self, x):
        box = {}
        return self.joiner(self.starter(x, box), box)


def thread_handoff_between_children():
    return _w("thread_handoff_between_children", ThreadHandoff().eval(), description="one child starts a thread "
              "that runs a third child, another child joins it", modules={"linear": {"starter.fc", "joiner.fc",
              "worker.a", "worker.b"}, "gelu": {"worker"}})  # fmt: skip


@contextlib.contextmanager
def _normalized(module, x):
    yield F.normalize(module(x), dim=-1)


class ContextHelper(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(16, 16)

    def forward(self, x):
        with _normalized(self.enc, x) as y:
            return F.logsigmoid(y)


def contextmanager_runs_child():
    return _w("contextmanager_runs_child", ContextHelper().eval(), description="a contextlib.contextmanager helper "
              "that runs a child in its __enter__", modules={"linear": {"enc"}, "normalize": {""},
              "logsigmoid": {""}})  # fmt: skip


UNSEEN15_CALL_MECHANISMS = {
    "vmap_child_in_forward": vmap_child_in_forward,
    "forward_partialmethod_lambda": forward_partialmethod_lambda,
    "children_through_map_reduce": children_through_map_reduce,
    "parameter_list_linear": parameter_list_linear,
    "thread_handoff_between_children": thread_handoff_between_children,
    "contextmanager_runs_child": contextmanager_runs_child,
}
