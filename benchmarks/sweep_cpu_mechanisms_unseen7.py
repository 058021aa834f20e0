"""Programs for cpu_sweep.py around how a model's modules are made and reached that the other sweep files leave out:
200 levels of nesting, 2,000 sibling modules, ``__getattribute__`` choosing the forward, modules equal by value
(``__eq__``/``__hash__``), falsy modules (``__len__`` of 0), a child run in a ``contextvars`` context saved before
profile(), a forward made by ``exec`` with functionals imported into its namespace, functionals held as default
arguments and partials, in OrderedDicts, nested registries and class-held config objects, a metaclass that wraps
forwards, ABC and Generic modules, ``nn.Sequential`` slices made in every forward, a child reached through a
``weakref.proxy``, ``torch.fx.Interpreter`` running a traced graph (sweep_cpu_mechanisms_unseen7_ops.py has the
tensors and calls of unusual kinds).

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import abc
import collections
import contextvars
import functools
import operator
import sys
import weakref
from typing import Generic, TypeVar

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, _w, _x
from torch import nn

# --- shape of the hierarchy -----------------------------------------------------------------------------------------


class Level(nn.Module):
    def __init__(self, depth: int):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.inner = Level(depth - 1) if depth > 1 else None

    def forward(self, x):
        x = F.silu(self.fc(x))
        return self.inner(x) if self.inner is not None else F.softsign(x)


def deep_nesting():
    deepest = ".".join(["inner"] * 199)
    limit = sys.getrecursionlimit()
    # the sweep's own raising check runs the model under a global forward hook, whose path in torch's _call_impl
    # is a frame deeper per module than the model alone: it needs a limit above the default; profile() does not
    sys.setrecursionlimit(max(limit, 3000))
    return _w("deep_nesting", Level(200).eval(), samples=[((_x(2, 8),), {})], description="200 levels of modules, "
              "each calling the next (about 600 Python frames deep unprofiled)",
              cleanup=lambda: sys.setrecursionlimit(limit),
              modules={"softsign": {deepest}}, calls={"silu": 200, "softsign": 1, "linear": 200})  # fmt: skip


class Wide(nn.Module):
    def __init__(self, n: int = 2000):
        super().__init__()
        self.cells = nn.ModuleList(nn.Linear(4, 4) for _ in range(n))

    def forward(self, x):
        return torch.stack([F.relu(cell(x)) for cell in self.cells]).sum(0)


def wide_modules():
    return _w("wide_modules", Wide().eval(), samples=[((_x(2, 4),), {})], warmup=1, description="2,000 sibling "
              "Linears in one ModuleList, each called once", calls={"relu": 2000, "linear": 2000},
              modules={"relu": {""}})  # fmt: skip


# --- modules that answer attribute lookups their own way -----------------------------------------------------------


class ChoosesForward(nn.Module):
    """``__getattribute__`` answers ``forward`` with another method, as some wrappers switch paths."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def __getattribute__(self, name):
        if name == "forward":
            return object.__getattribute__(self, "fast_forward")
        return super().__getattribute__(name)

    def forward(self, x):  # never run: __getattribute__ answers with fast_forward
        return F.elu(self.fc(x))

    def fast_forward(self, x):
        return F.hardswish(self.fc(x))


class ByConfig(nn.Module):
    """``__getattr__`` falls back to a config dict, then raises AttributeError."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.config = {"act": F.mish, "scale": 0.5}

    def __getattr__(self, name):
        config = self.__dict__.get("config", {})
        if name in config:
            return config[name]
        return super().__getattr__(name)

    def forward(self, x):
        return self.act(self.fc(x)) * self.scale


class AttributeChoosers(nn.Module):
    def __init__(self):
        super().__init__()
        self.chooser, self.config = ChoosesForward(), ByConfig()

    def forward(self, x):
        return self.config(self.chooser(x))


def getattribute_forward():
    return _w("getattribute_forward", AttributeChoosers().eval(), description="__getattribute__ answering 'forward' "
              "with another method; __getattr__ falling back to a config dict holding F.mish",
              modules={"hardswish": {"chooser"}, "mish": {"config"}, "linear": {"chooser.fc", "config.fc"}},
              calls={"hardswish": 1, "mish": 1})  # fmt: skip


class ByValue(nn.Module):
    """Equal (and hashing equal) when configured alike, as a config-keyed cache might want."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.width, self.fc = width, nn.Linear(width, width)

    def __eq__(self, other):
        return isinstance(other, ByValue) and other.width == self.width

    def __hash__(self):
        return hash(("ByValue", self.width))

    def forward(self, x):
        return F.gelu(self.fc(x))


class Falsy(nn.Module):
    """A module that is falsy: ``__len__`` counts its pending items, none."""

    def __init__(self):
        super().__init__()
        self.fc, self.pending = nn.Linear(16, 16), []

    def __len__(self):
        return len(self.pending)

    def forward(self, x):
        return F.tanhshrink(self.fc(x))


class OddIdentity(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.empty = ByValue(), ByValue(), Falsy()

    def forward(self, x):
        return self.empty(self.b(self.a(x)))


def value_equal_modules():
    return _w("value_equal_modules", OddIdentity().eval(), description="two children equal and hashing equal by "
              "value (torch's named_modules() lists only the first, by its memo of hashes); a child whose __len__ "
              "is 0 (falsy)",
              modules={"tanhshrink": {"empty"}, "gelu": {"a", "b"}}, calls={"gelu": 2, "tanhshrink": 1})  # fmt: skip


# --- where the code and the context come from ----------------------------------------------------------------------

_SAVED = contextvars.copy_context()  # a context saved at import, before any profile()


class SavedContext(nn.Module):
    def __init__(self):
        super().__init__()
        self.child, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        h = _SAVED.copy().run(self.child, x)  # the child runs in a context copied from the import-time one
        return self.head(F.relu(h))


def stored_context_run():
    return _w("stored_context_run", SavedContext().eval(), description="a child run by Context.run in a copy of a "
              "contextvars context saved at import, before profile() set its variables",
              modules={"gelu": {"child"}, "layer_norm": {"child.norm"}, "relu": {""}},
              calls={"gelu": 1, "relu": 1})  # fmt: skip


_SOURCE = """
from torch.nn.functional import celu, linear as project

def forward(self, x):
    return celu(project(x, self.weight, self.bias))
"""


def _exec_forward():
    namespace: dict = {}
    exec(compile(_SOURCE, "<generated>", "exec"), namespace)  # noqa: S102 (a model that writes its own code)
    return namespace["forward"]


class Generated(nn.Module):
    forward = _exec_forward()

    def __init__(self):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.randn(16, 16) / 4), nn.Parameter(torch.zeros(16))


class GeneratedParent(nn.Module):
    def __init__(self):
        super().__init__()
        self.gen = Generated()

    def forward(self, x):
        return self.gen(x)


def exec_generated_forward():
    return _w("exec_generated_forward", GeneratedParent().eval(), description="a forward written by exec into a "
              "namespace of its own, with celu and linear imported into it by name before profile()",
              modules={"celu": {"gen"}, "linear": {"gen"}}, calls={"celu": 1, "linear": 1})  # fmt: skip


class HeldReferences(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.tanh_gelu = functools.partial(F.gelu, approximate="tanh")
        self.table = {"norm": functools.partial(F.normalize, dim=-1)}
        self.caller = operator.methodcaller("softmax", -1)

    def forward(self, x, act=F.softplus, *, post=F.logsigmoid):  # functionals as default arguments
        return post(self.caller(self.table["norm"](act(self.tanh_gelu(self.fc(x))))))


def defaults_and_partials():
    return _w("defaults_and_partials", HeldReferences().eval(), description="functionals as a forward's default "
              "arguments (positional and keyword-only), functools.partial in an attribute and a dict, "
              "operator.methodcaller('softmax')", modules={name: {""} for name in ("gelu", "softplus", "normalize",
              "logsigmoid")}, calls={"gelu": 1, "softplus": 1, "normalize": 1, "logsigmoid": 1})  # fmt: skip


class HeldDeeper(nn.Module):
    SETTINGS = type("Settings", (), {})()  # a config object of the model's own, held as a class attribute

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.ordered = collections.OrderedDict(act=F.elu)
        self.defaulted = collections.defaultdict(lambda: F.relu6, {"act": F.hardtanh})
        self.registries = {"vision": {"act": F.tanhshrink}, "text": (F.softsign, 2.0)}

    def forward(self, x):
        x = self.SETTINGS.act(self.fc(x))
        x = self.defaulted["act"](self.ordered["act"](x))
        act, scale = self.registries["text"]
        return act(self.registries["vision"]["act"](x)) * scale


HeldDeeper.SETTINGS.act = F.silu


def held_deeper():
    return _w("held_deeper", HeldDeeper().eval(), description="functionals in an OrderedDict, a defaultdict, a dict "
              "of dicts, a tuple in a dict, and a config object held as a class attribute",
              modules={name: {""} for name in ("silu", "elu", "hardtanh", "tanhshrink", "softsign")},
              calls={name: 1 for name in ("silu", "elu", "hardtanh", "tanhshrink", "softsign")})  # fmt: skip


# --- classes made unusually ----------------------------------------------------------------------------------------


def _traced(forward):
    @functools.wraps(forward)
    def wrapped(self, *args, **kwargs):
        return F.hardtanh(forward(self, *args, **kwargs))

    return wrapped


class WrapsForwards(type(nn.Module)):
    """A metaclass that wraps every class's own forward when the class is made."""

    def __new__(mcs, name, bases, namespace):
        if "forward" in namespace:
            namespace["forward"] = _traced(namespace["forward"])
        return super().__new__(mcs, name, bases, namespace)


class MetaBlock(nn.Module, metaclass=WrapsForwards):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return F.relu6(self.fc(x))


class AbstractBlock(nn.Module, abc.ABC):
    @abc.abstractmethod
    def act(self, x): ...

    def forward(self, x):
        return self.act(x)


T = TypeVar("T")


class TypedBlock(AbstractBlock, Generic[T]):
    def act(self, x):
        return F.silu(x)


class ClassKinds(nn.Module):
    def __init__(self):
        super().__init__()
        self.meta, self.typed = MetaBlock(), TypedBlock[int]()  # Generic[...]() sets __orig_class__ on the instance

    def forward(self, x):
        return self.typed(self.meta(x))


def metaclass_modules():
    return _w("metaclass_modules", ClassKinds().eval(), description="a metaclass wrapping forwards at class "
              "creation; an abc.ABC module with an abstract method; a Generic[T] module made as TypedBlock[int]()",
              modules={"hardtanh": {"meta"}, "relu6": {"meta"}, "silu": {"typed"}},
              calls={"hardtanh": 1, "silu": 1})  # fmt: skip


class Slices(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 16), nn.Tanh())
        self.proxied = Mlp()
        # a proxy is taken for a module by nn.Module.__setattr__ (and is unhashable): kept in __dict__ past it
        self.__dict__["proxy"] = weakref.proxy(self.proxied)

    def forward(self, x):
        h = self.seq[1:](self.seq[0](x))  # a new Sequential of the same children in every call
        h = nn.Sequential(*list(self.seq)[2:])(h)  # and one made from a list of them
        return self.proxy(h)


def sequential_slices():
    return _w("sequential_slices", Slices().eval(), description="Sequential slices and a Sequential built from the "
              "children in every forward (unregistered containers of registered children); a child called through "
              "a weakref.proxy", modules={"gelu": {"seq.1", "proxied"}, "linear": {"seq.0", "seq.2", "proxied.fc1",
              "proxied.fc2"}}, calls={"torch.tanh": 2, "gelu": 2})  # fmt: skip


class FxRun(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph = torch.fx.symbolic_trace(Mlp().eval())
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        h = torch.fx.Interpreter(self.graph).run(x)  # runs each node: call_module through the graph's submodules
        return F.softsign(self.head(h))


def fx_interpreter():
    # the interpreter runs the graph's nodes in the parent's forward (the graph's own forward is never called): its
    # gelu is the parent's, its call_module nodes call the graph's submodules
    return _w("fx_interpreter", FxRun().eval(), description="torch.fx.Interpreter running a symbolic_trace'd Mlp "
              "in every forward (its gelu node's target captured at trace time, before profile())",
              modules={"gelu": {""}, "layer_norm": {"graph.norm"}, "softsign": {""}},
              calls={"gelu": 1})  # fmt: skip


UNSEEN7_MECHANISMS = {f.__name__: f for f in (
    deep_nesting, wide_modules, getattribute_forward, value_equal_modules, stored_context_run, exec_generated_forward,
    defaults_and_partials, held_deeper, metaclass_modules, sequential_slices, fx_interpreter,
)}  # fmt: skip
