"""Programs for cpu_sweep.py around how a model calls its modules that the other sweep files leave out: global module
hooks, a hook registered inside a forward, hooks that call registered modules, full backward hooks and saved-tensor
hooks fired inside a forward, submodules named with characters a scope name holds (``#``, ``@``, ``%``, ``:``,
spaces, quotes, non-ASCII, 3000 characters), a child's exception caught by its parent, one module called from two
threads at once, children run by asyncio tasks, forwards under decorators, and ``*args``/``**kwargs`` forwards taking
and returning named tuples and dicts (sweep_cpu_mechanisms_unseen5_instances.py has the modules made unusually).

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from typing import NamedTuple

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, Net, _w, _x
from torch import nn

# --- hooks ----------------------------------------------------------------------------------------------------------


class HooksItsChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Mlp(), Mlp()

    def forward(self, x):
        handle = self.b.register_forward_hook(lambda m, args, out: F.softsign(out))
        try:
            return self.b(self.a(x))
        finally:
            handle.remove()


def hook_registered_in_forward():
    return _w("hook_registered_in_forward", HooksItsChild().eval(), description="a forward hook registered and "
              "removed inside the parent's forward (in the hooked module's scope, as one registered before)",
              modules={"gelu": {"a", "b"}, "softsign": {"b"}}, calls={"softsign": 1})  # fmt: skip


def global_module_hooks():
    from torch.nn.modules import module as module_globals

    model = Net().eval()
    handles = [
        module_globals.register_module_forward_pre_hook(lambda m, args: None),
        module_globals.register_module_forward_hook(
            lambda m, args, out: F.hardtanh(out) if isinstance(m, nn.LayerNorm) else None),
    ]  # fmt: skip

    def remove():
        for handle in handles:
            handle.remove()

    return _w("global_module_hooks", model, cleanup=remove, description="register_module_forward_pre_hook and "
              "register_module_forward_hook (global) on every module, one replacing LayerNorm outputs (in their scope)",
              modules={"gelu": {"a", "b"}, "hardtanh": {"a.norm", "b.norm"}}, calls={"hardtanh": 2})  # fmt: skip


class Probed(nn.Module):
    """A pre-hook and a forward hook that call registered modules of the parent (probes)."""

    def __init__(self):
        super().__init__()
        self.body, self.probe_in, self.probe_out = Mlp(), nn.Linear(16, 16), nn.Sequential(nn.Linear(16, 16), nn.ELU())
        self.body.register_forward_pre_hook(lambda m, args: (args[0] + self.probe_in(args[0]),))
        self.body.register_forward_hook(lambda m, args, out: out + self.probe_out(out))

    def forward(self, x):
        return F.softsign(self.body(x))


def hooks_calling_modules():
    return _w("hooks_calling_modules", Probed().eval(), description="a forward pre-hook and a forward hook that call "
              "registered modules", modules={"gelu": {"body"}, "elu": {"probe_out.1"}, "softsign": {""},
              "linear": {"body.fc1", "body.fc2", "probe_in", "probe_out.0"}},
              calls={"linear": 4})  # fmt: skip


class BackwardHooked(nn.Module):
    """Full backward hooks and saved-tensor hooks that fire inside the forward's own autograd.grad."""

    def __init__(self):
        super().__init__()
        self.mlp, self.head = Mlp(), nn.Linear(16, 16)
        self.mlp.register_full_backward_pre_hook(lambda m, grad_out: (F.normalize(grad_out[0], dim=-1),))
        self.mlp.register_full_backward_hook(lambda m, grad_in, grad_out: (torch.tanh(grad_in[0]),))

    def forward(self, x):
        pack = lambda t: t.clone()  # noqa: E731
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t * 1):
            x = x.detach().requires_grad_()
            y = self.mlp(x)
            (grad,) = torch.autograd.grad(F.silu(y).sum(), x)
        return self.head(grad) + y.detach()


def backward_hooks_in_forward():
    return _w("backward_hooks_in_forward", BackwardHooked().eval(), description="full backward (pre-)hooks and "
              "saved_tensors_hooks firing in an autograd.grad inside the forward",
              modules={"gelu": {"mlp"}, "silu": {""}}, calls={"normalize": 1})  # fmt: skip


# --- names, exceptions, threads ------------------------------------------------------------------------------------

# "a@b" and "a%40b": one escaped is the other's text; "n" * 3000: a scope name longer than any other
ODD_NAMES = [
    "a b",
    "x#1",
    "ks.fn:gelu#0@a",
    "100%",
    "ünï",
    "quote'\"",
    "tab\tand\nline",
    "[0]",
    "a@b",
    "a%40b",
    "n" * 3000,
]


class OddNames(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleDict({name.replace(".", "_"): Mlp() for name in ODD_NAMES})

    def forward(self, x):
        for block in self.blocks.values():
            x = block(x)
        return x


def odd_module_names():
    names = {f"blocks.{name.replace('.', '_')}" for name in ODD_NAMES}
    return _w("odd_module_names", OddNames().eval(), description="submodules named with #, @, %, :, spaces, quotes, "
              "tabs, newlines, brackets, non-ASCII, 3000 characters; one name the other's escaped text",
              modules={"gelu": names, "layer_norm": {f"{name}.norm" for name in names}},
              calls={"gelu": len(names)})  # fmt: skip


class Risky(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        y = F.gelu(self.fc(x))
        if y.shape[0] > 2:
            raise ValueError("batch too large for the fast path")
        return y


class FallsBack(nn.Module):
    def __init__(self):
        super().__init__()
        self.risky, self.safe = Risky(), Mlp()

    def forward(self, x):
        try:
            y = self.risky(x)
        except ValueError:
            y = F.silu(self.safe(x))
        try:
            return self.risky(y[:2]) + F.mish(y[:2])
        except ValueError:  # never raised: a call after a caught exception opens its scopes as before
            return y


def caught_exceptions():
    return _w("caught_exceptions", FallsBack().eval(), description="a child's exception caught by its parent, which "
              "falls back to another child", modules={"gelu": {"risky", "safe"}, "silu": {""}, "mish": {""}},
              calls={"gelu": 3})  # fmt: skip


class TwoThreads(nn.Module):
    """One submodule called from two threads at once, each on its own half of the batch."""

    def __init__(self):
        super().__init__()
        self.mlp, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        halves, outs, errors, start = x.chunk(2), [None, None], [], threading.Barrier(2)

        def run(i):
            start.wait()
            try:
                outs[i] = self.mlp(halves[i])
            except BaseException as exc:  # handed to the caller, as a worker pool would
                errors.append(exc)

        workers = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        if errors:
            raise errors[0]
        return self.head(torch.cat(outs))


def threads_same_module():
    return _w("threads_same_module", TwoThreads().eval(), description="one submodule called from two threads at "
              "once", modules={"gelu": {"mlp"}, "layer_norm": {"mlp.norm"}}, calls={"gelu": 2})  # fmt: skip


class Tasks(nn.Module):
    """Two children run by asyncio tasks that interleave at every await (each task runs in a copied context)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = Mlp(), Mlp()

    def forward(self, x):
        async def twice(module, y):
            await asyncio.sleep(0)
            y = module(y)
            await asyncio.sleep(0)
            return F.silu(module(y))

        async def both():
            return await asyncio.gather(twice(self.a, x), twice(self.b, x))

        left, right = asyncio.run(both())
        return left + right


def asyncio_tasks():
    return _w("asyncio_tasks", Tasks().eval(), description="children called from asyncio tasks gathered by "
              "asyncio.run in the forward", modules={"gelu": {"a", "b"}, "silu": {""}},
              calls={"gelu": 4, "silu": 2})  # fmt: skip


# --- forwards under decorators, and their arguments ----------------------------------------------------------------


def logged(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        return fn(*args, **kwargs)

    return call


class Quiet(contextlib.ContextDecorator):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Decorated(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = Mlp(), nn.Linear(16, 16), nn.Linear(16, 16)

    @functools.lru_cache(maxsize=4)  # noqa: B019
    def mask(self, n: int) -> torch.Tensor:
        return torch.tril(torch.ones(n, n))

    @logged
    @torch.no_grad()
    def first(self, x):
        return self.a(x)

    @Quiet()
    @torch.inference_mode()
    def second(self, x):
        return F.hardswish(self.b(x))

    @logged
    def forward(self, x):
        y = self.first(x)
        y = self.second(y.clone())
        return self.mask(y.shape[0]) @ F.celu(self.c(y))


def decorated_forwards():
    return _w("decorated_forwards", Decorated().eval(), description="forwards and helpers under functools.wraps, "
              "no_grad, inference_mode, a ContextDecorator and lru_cache", modules={"gelu": {"a"},
              "hardswish": {""}, "celu": {""}}, calls={"torch.tril": 0})  # fmt: skip


class Pair(NamedTuple):
    left: torch.Tensor
    right: torch.Tensor


class StarArgs(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.proj = Mlp(), nn.Linear(16, 16)

    def forward(self, *args, **kwargs):
        pair, extras = args[0], kwargs["extras"]
        y = self.mlp(pair.left) + self.proj(pair.right) * kwargs.get("scale", 1.0)
        return {"pair": Pair(F.gelu(y), extras["bias"] + y), "count": len(args)}


def star_args_structured_io():
    samples = [((Pair(_x(), _x()),), {"extras": {"bias": _x()}, "scale": 0.5}),
               ((Pair(_x(), _x()), "unused"), {"extras": {"bias": _x()}})]  # fmt: skip
    return _w("star_args_structured_io", StarArgs().eval(), samples=samples, description="forward(*args, **kwargs) "
              "taking a NamedTuple and a dict, returning a dict holding a NamedTuple",
              modules={"gelu": {"mlp", ""}}, calls={"gelu": 4, "linear": 6})  # fmt: skip


UNSEEN5_MECHANISMS = {f.__name__: f for f in (
    hook_registered_in_forward, global_module_hooks, hooks_calling_modules, backward_hooks_in_forward,
    odd_module_names, caught_exceptions, threads_same_module, asyncio_tasks, decorated_forwards,
    star_args_structured_io,
)}  # fmt: skip
