"""Programs for cpu_sweep.py around modules made or held unusually that the other sweep files leave out: classes made
by ``type()`` in a module that does not exist and defined in a function, modules whose ``__setattr__`` refuses new
attributes, a child deep-copied in the forward, tied weights, routing by key through a ModuleDict, Python control
flow on ``.item()`` and ``.tolist()``, and cached parametrizations.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, Net, _w, _x
from torch import nn

# --- classes and instances made unusually --------------------------------------------------------------------------


def _dynamic_block():
    def forward(self, x):
        return F.selu(self.fc(x))

    def init(self):
        nn.Module.__init__(self)
        self.fc = nn.Linear(16, 16)

    return type("DynamicBlock", (nn.Module,), {"__init__": init, "forward": forward,
                                               "__module__": "generated.never_imported"})  # fmt: skip


def _local_block():
    class Block(nn.Module):  # a class defined in a function, same name as the next one
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 16)

        def forward(self, x):
            return F.softplus(self.fc(x))

    return Block


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return F.tanhshrink(self.fc(x))


class MadeUnusually(nn.Module):
    def __init__(self):
        super().__init__()
        self.dynamic, self.local, self.plain = _dynamic_block()(), _local_block()(), Block()

    def forward(self, x):
        return self.plain(self.local(self.dynamic(x)))


def dynamic_classes():
    return _w("dynamic_classes", MadeUnusually().eval(), description="a class made by type() in a module that was "
              "never imported, a class defined in a function with the name of a module-level one",
              modules={"selu": {"dynamic"}, "softplus": {"local"}, "tanhshrink": {"plain"}})  # fmt: skip


class Frozen(nn.Module):
    """A module that refuses new attributes after construction (some libraries freeze their configs so)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self._frozen = True

    def __setattr__(self, name, value):
        if getattr(self, "_frozen", False) and name not in self.__dict__:
            raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name}")
        super().__setattr__(name, value)

    def forward(self, x):
        return F.gelu(self.fc(x))


class HoldsFrozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.frozen, self.mlp = Frozen(), Mlp()

    def forward(self, x):
        return self.mlp(self.frozen(x))


def frozen_setattr():
    return _w("frozen_setattr", HoldsFrozen().eval(), description="a module whose __setattr__ refuses new "
              "attributes after construction", modules={"gelu": {"frozen", "mlp"}})  # fmt: skip


class CopiesChild(nn.Module):
    """Deep-copies a child in every forward, scales the copy's weights and calls it (test-time ensembles do)."""

    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        twin = copy.deepcopy(self.mlp)
        twin.fc1.weight.mul_(0.5)
        shallow = copy.copy(self.mlp)
        return self.mlp(x) + twin(x) + shallow(x)


def deepcopy_in_forward():
    return _w("deepcopy_in_forward", CopiesChild().eval(), description="a child deep-copied (and shallow-copied) in "
              "the forward, the copy's weights changed", calls={"gelu": 3})  # fmt: skip


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.mlp, self.head = nn.Embedding(50, 16), Mlp(), nn.Linear(16, 50, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        h = self.mlp(self.embed(ids))
        return self.head(h) + F.linear(h, self.embed.weight)


def weight_tying():
    ids = torch.randint(0, 50, (2, 8))
    return _w("weight_tying", Tied().eval(), samples=[((ids,), {})], description="an embedding tied to the head, "
              "and its weight used by a functional", modules={"embedding": {"embed"},
              "linear": {"mlp.fc1", "mlp.fc2", "head", ""}})  # fmt: skip


class Routed(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleDict({"text": Mlp(), "image": Mlp(), "audio": Mlp()})
        self.stages = nn.ModuleList(nn.Linear(16, 16) for _ in range(3))
        self.scales = nn.ParameterList(nn.Parameter(torch.full((16,), 0.5 + i)) for i in range(3))

    def forward(self, x, kind: str):
        x = self.experts[kind](x)
        for stage, scale in zip(reversed(self.stages), self.scales, strict=True):
            x = F.relu6(stage(x)) * scale
        return x


def routed_containers():
    samples = [((_x(), "text"), {}), ((_x(), "audio"), {}), ((_x(), "text"), {})]
    return _w("routed_containers", Routed().eval(), samples=samples, description="a ModuleDict routed by a string "
              "argument, a ModuleList reversed and zipped with a ParameterList",
              modules={"gelu": {"experts.text", "experts.audio"}, "relu6": {""}, "linear": {"stages.0", "stages.1",
              "stages.2", "experts.text.fc1", "experts.text.fc2", "experts.audio.fc1", "experts.audio.fc2"}},
              calls={"relu6": 9})  # fmt: skip


class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.step, self.out = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        steps = int(x.abs().sum().item()) % 3 + 1
        for _ in range(steps):
            x = self.step(x)
        keep = [i for i, v in enumerate(x.mean(-1).tolist()) if v > -10]
        scores = self.out(x[keep])
        if bool((scores > 0).any()):
            scores = F.relu(scores)
        return scores, steps


def data_dependent_python():
    return _w("data_dependent_python", DataDependent().eval(), description="Python control flow on .item(), "
              ".tolist() and a tensor's truth value", modules={"gelu": {"step"}})  # fmt: skip


def parametrize_cached():
    import torch.nn.utils.parametrize as parametrize

    class Positive(nn.Module):
        def forward(self, weight):
            return F.softplus(weight)

    model = Net().eval()
    parametrize.register_parametrization(model.a.fc1, "weight", Positive())
    parametrize.register_parametrization(model.head, "weight", Positive())

    def cached(x):
        with parametrize.cached():
            return model(x) + model.head(x)

    return _w("parametrize_cached", model, fn=cached, description="parametrizations read under "
              "parametrize.cached(), one module called twice", calls={"softplus": 2})  # fmt: skip


UNSEEN5_INSTANCE_MECHANISMS = {f.__name__: f for f in (
    dynamic_classes, frozen_setattr, deepcopy_in_forward, weight_tying, routed_containers, data_dependent_python,
    parametrize_cached,
)}  # fmt: skip
