"""More programs for cpu_sweep.py around mechanisms the earlier program files leave out: ``functional_call`` with tied
and with parametrized weights, a hook that calls its own module again, a hypernetwork writing a child's parameters, an
``unsafe`` low-rank parametrization, a partial of the model profiled, pytree classes in and out, children run by
``asyncio.to_thread`` and in a copied context, functionals that raise and are caught, tensors printed in a forward,
forwards returning a module, a Parameter and a structseq, one forward function shared by two classes, a
``__getattr__`` raising KeyError.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools

import torch
import torch.nn.functional as F  # noqa: N812
import torch.utils._pytree as pytree
from sweep_cpu_mechanisms import Mlp, Net, _w, _x
from torch import nn
from torch.nn.utils import parametrize


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.head = nn.Embedding(32, 16), nn.Linear(16, 32, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(F.gelu(self.emb(ids)))


class FunctionalTied(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Tied()

    def forward(self, ids):
        params = {"emb.weight": self.model.emb.weight * 0.5}
        return torch.func.functional_call(self.model, (params, {}), (ids,), tie_weights=True, strict=True)


def functional_call_tied_strict():
    return _w("functional_call_tied_strict", FunctionalTied().eval(), samples=[((torch.randint(0, 32, (2, 5)),),
              {})], description="torch.func.functional_call with a (params, buffers) tuple, tie_weights and strict "
              "over a model whose head is tied to its embedding", modules={"gelu": {"model"}},
              calls={"gelu": 1, "embedding": 1})  # fmt: skip


class FlipAveraged(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.head, self.inside = Mlp(), nn.Linear(16, 4), False
        self.mlp.register_forward_hook(self.flip_average)

    def flip_average(self, module, args, out):
        if self.inside:
            return None
        self.inside = True
        try:
            return (out + module(args[0].flip(-1)).flip(-1)) / 2
        finally:
            self.inside = False

    def forward(self, x):
        return self.head(self.mlp(x))


def hook_calls_its_module():
    return _w("hook_calls_its_module", FlipAveraged().eval(), description="a forward hook that calls its own "
              "module again on a flipped input and averages (test-time augmentation)", modules={"gelu": {"mlp"}},
              calls={"gelu": 2})  # fmt: skip


class Hypernetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.target = nn.Linear(16, 16)
        self.hyper = nn.Linear(8, sum(p.numel() for p in self.target.parameters()))
        self.code = nn.Parameter(torch.randn(8))

    def forward(self, x):
        nn.utils.vector_to_parameters(F.tanh(self.hyper(self.code)) * 0.1, self.target.parameters())
        flat = nn.utils.parameters_to_vector(self.target.parameters())
        return F.silu(self.target(x)) + flat.mean()


def hypernetwork_parameters():
    return _w("hypernetwork_parameters", Hypernetwork().eval(), description="a hypernetwork writing a child's "
              "parameters with vector_to_parameters at each call, read back by parameters_to_vector",
              modules={"linear": {"hyper", "target"}}, calls={"tanh": 1, "silu": 1})  # fmt: skip


class LowRank(nn.Module):
    """weight = left @ right: the stored parameter has another shape than the weight (unsafe=True)."""

    def __init__(self, rank: int = 4, columns: int = 32):
        super().__init__()
        self.right = nn.Parameter(torch.randn(rank, columns) * 0.1)

    def forward(self, left):
        return F.linear(left, self.right.t())

    def right_inverse(self, weight):
        return weight[:, : self.right.shape[0]].clone()


def parametrize_unsafe_low_rank():
    model = Mlp().eval()
    parametrize.register_parametrization(model.fc2, "weight", LowRank(), unsafe=True)
    return _w("parametrize_unsafe_low_rank", model, description="an unsafe parametrization whose stored "
              "parameter (16x4) has another shape than the weight (16x32), made by F.linear, with a right_inverse",
              modules={"linear": {"fc1", "fc2", "fc2.parametrizations.weight.0"}}, calls={"linear": 3})  # fmt: skip


class FunctionalParametrized(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()
        nn.utils.parametrizations.weight_norm(self.mlp.fc1)

    def forward(self, x):
        original = self.mlp.fc1.parametrizations.weight.original1
        swapped = {"fc1.parametrizations.weight.original1": original * 2}
        return torch.func.functional_call(self.mlp, swapped, (x,)) + self.mlp(x)


def functional_call_parametrized():
    return _w("functional_call_parametrized", FunctionalParametrized().eval(), description="torch.func."
              "functional_call swapping a weight_norm parametrization's original, and the child run as it is",
              calls={"gelu": 2})  # fmt: skip


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Net()

    def forward(self, x, scale=1.0):
        return self.net(x) * scale


def partial_of_model():
    model = Scaled().eval()
    return _w("partial_of_model", model, fn=functools.partial(model, scale=0.5), description="profile() of a "
              "functools.partial of the model with a keyword bound, module= the model")  # fmt: skip


class Pair:
    def __init__(self, left, right):
        self.left, self.right = left, right

    def to_tuple(self):  # how the sweep's comparison reads outputs it does not know
        return self.left, self.right


pytree.register_pytree_node(Pair, lambda p: ((p.left, p.right), None), lambda children, _: Pair(*children))


class PairModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.left, self.right = Mlp(), nn.Linear(16, 16)

    def forward(self, pair: Pair):
        return Pair(self.left(pair.left), F.silu(self.right(pair.right)))


def pytree_pair_in_out():
    return _w("pytree_pair_in_out", PairModel().eval(), samples=[((Pair(_x(), _x()),), {})],
              description="a class registered as a pytree node given to and returned by the model",
              modules={"gelu": {"left"}, "silu": {""}}, calls={"gelu": 1, "silu": 1})  # fmt: skip


class ThreadedChildren(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.head = Mlp(), Mlp(), nn.Linear(16, 4)

    async def _both(self, x):
        return await asyncio.to_thread(self.a, x)

    def forward(self, x):
        h = asyncio.run(self._both(x))
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            h = pool.submit(contextvars.copy_context().run, self.b, h).result()
        return self.head(h)


def threads_with_copied_context():
    return _w("threads_with_copied_context", ThreadedChildren().eval(), description="a child run by "
              "asyncio.to_thread under asyncio.run, another by a pool thread in a copy of the forward's context",
              modules={"gelu": {"a", "b"}}, calls={"gelu": 2})  # fmt: skip


class CatchesFailures(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.wrong = nn.Linear(16, 16), nn.Parameter(torch.randn(16, 8))

    def forward(self, x):
        h = self.fc(x)
        try:
            h = F.softmax(h, dim=3)
        except IndexError:
            h = F.softmax(h, dim=-1)
        try:
            out = F.linear(h, self.wrong)
        except RuntimeError:
            out = F.linear(h, self.wrong.t())
        return out


def functional_raises_caught():
    return _w("functional_raises_caught", CatchesFailures().eval(), description="functionals that raise on bad "
              "arguments (softmax's dim, linear's shapes), caught by the forward, which calls them again",
              modules={"softmax": {""}})  # fmt: skip


class Logging(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.lines = Mlp(), []

    def forward(self, x):
        h = self.mlp(x)
        self.lines = [repr(h[:1, :4]), str(h.sum()), f"{h.mean():.3f}", str(h[0, :3].tolist())]
        return F.silu(h)


def tensor_repr_in_forward():
    return _w("tensor_repr_in_forward", Logging().eval(), description="a forward logging tensors: repr, str, a "
              "format spec and tolist (torch's printing runs ops of its own)", modules={"silu": {""}},
              calls={"silu": 1, "gelu": 1})  # fmt: skip


class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleList(Mlp() for _ in range(2))

    def forward(self, x):
        return self.experts[int(x.sum() > 0)]


class WeightGetter(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 16))

    def forward(self):
        return self.weight


class ReturnsObjects(nn.Module):
    def __init__(self):
        super().__init__()
        self.router, self.getter = Router(), WeightGetter()

    def forward(self, x):
        expert = self.router(x)
        best = torch.max(expert(x), dim=-1)
        weight = self.getter()
        usable = isinstance(weight, nn.Parameter) and weight is self.getter.weight
        return F.linear(x, weight if usable else -weight) * best.values[:, None] + best.indices[:, None]


def forward_returns_objects():
    return _w("forward_returns_objects", ReturnsObjects().eval(), description="children that return a module the "
              "parent calls, a Parameter the parent checks by type and identity, and torch.max's structseq read by "
              "field", calls={"gelu": 1})  # fmt: skip


class SharedForward(nn.Module):
    forward = Mlp.forward  # another class's function, shared (a library aliasing an implementation)

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.norm = nn.Linear(16, 32), nn.Linear(32, 16), nn.LayerNorm(16)


class SharesForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Mlp(), SharedForward()

    def forward(self, x):
        return type(self.b).forward(self.b, self.a(x)) + SharedForward.forward(self.b, x)


def class_forward_shared():
    return _w("class_forward_shared", SharesForward().eval(), description="two classes whose forward is one "
              "function object, the second called through its class twice", modules={"gelu": {"a", "b"}},
              calls={"gelu": 3})  # fmt: skip


class ConfigAttributes(nn.Module):
    """A module answering unknown attributes from its config, with a KeyError for names it does not hold."""

    def __init__(self):
        super().__init__()
        self.fc, self.config = nn.Linear(16, 16), {"scale": 0.5}

    def __getattr__(self, name):
        if name in ("fc", "config") or name.startswith("_"):
            return super().__getattr__(name)
        return self.__dict__["config"][name]

    def forward(self, x):
        return F.gelu(self.fc(x)) * self.scale


class HoldsConfigAttributes(nn.Module):
    def __init__(self):
        super().__init__()
        self.block, self.head = ConfigAttributes(), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.block(x))


def getattr_raises_keyerror():
    return _w("getattr_raises_keyerror", HoldsConfigAttributes().eval(), description="a module whose __getattr__ "
              "raises KeyError (not AttributeError) for names its config lacks", modules={"gelu": {"block"}},
              calls={"gelu": 1})  # fmt: skip


UNSEEN12_MORE_MECHANISMS = {
    f.__name__: f
    for f in (functional_call_tied_strict, hook_calls_its_module,
              hypernetwork_parameters, parametrize_unsafe_low_rank,
              functional_call_parametrized, partial_of_model, pytree_pair_in_out, threads_with_copied_context,
              functional_raises_caught, tensor_repr_in_forward, forward_returns_objects,
              class_forward_shared, getattr_raises_keyerror)
}  # fmt: skip
