"""More mechanisms for cpu_sweep.py (sweep_cpu_mechanisms.py holds the first ones): torch.func, autocast,
layouts and dtypes, nested tensors, checkpointing, inference_mode, autograd Functions, torch.library ops, tensor
subclasses, unusual outputs, threads, functionals through aliases, torch.ops.aten, in-place ops on inputs, unusual
samples, empty sample lists and no warm-up."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, _w, _x
from torch import nn
from torch.nn.functional import *  # noqa: F403 (the alias mechanism itself)


class FuncInside(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.fc = Mlp(), nn.Linear(16, 16)

    def forward(self, x):
        from torch.func import functional_call, grad, vmap

        params = dict(self.fc.named_parameters())
        y = functional_call(self.fc, params, (x,))
        z = vmap(self.mlp)(x.unsqueeze(1)).squeeze(1)
        g = grad(lambda t: F.silu(t).sum())(x)
        return y + z + g


def func_transforms():
    return _w("func_transforms", FuncInside().eval(), description="functional_call, vmap, grad inside forward")


class Autocast(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.mlp(x)
        return y.float()


def autocast_bf16():
    return _w("autocast_bf16", Autocast().eval(), description="torch.autocast on the CPU, bf16")


class Convs(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.bn, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Conv2d(8, 8, 3, groups=2)
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        return self.pool(F.relu(self.c2(F.relu(self.bn(self.c1(x)))))).flatten(1)


def channels_last():
    model = Convs().eval().to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 16, 16).to(memory_format=torch.channels_last)
    return _w("channels_last", model, samples=[((x,), {})], description="convs in channels_last")


class Dtypes(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)

    def forward(self, ids, z):
        spectrum = torch.fft.fft(z) * z.conj()
        counts = torch.bincount(ids.flatten(), minlength=100)
        bits = (ids & 7) << 2
        return self.emb(ids).sum() + spectrum.abs().sum() + counts.sum() + bits.sum(), spectrum


def complex_and_integer():
    ids, z = torch.randint(0, 100, (4, 8)), torch.randn(4, 8, dtype=torch.complex64)
    return _w("complex_and_integer", Dtypes().eval(), samples=[((ids, z), {})],
              description="complex64 fft, int64 bit ops, bincount, embedding")  # fmt: skip


class Jagged(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, parts):
        nt = torch.nested.nested_tensor(parts, layout=torch.jagged)
        return F.relu(self.fc(nt)).sin()


def nested_jagged():
    parts = [torch.randn(n, 16) for n in (3, 5, 2)]
    return _w("nested_jagged", Jagged().eval(), samples=[((parts,), {})], description="a jagged nested tensor")


class Checkpointed(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Mlp(), Mlp()

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        with torch.inference_mode():
            y = self.b(x)
        return checkpoint(self.a, x, use_reentrant=False) + checkpoint(self.a, x, use_reentrant=True) + y.clone()


def checkpoint_inference_mode():
    return _w("checkpoint_inference_mode", Checkpointed().eval(),
              description="torch.utils.checkpoint (both kinds), torch.inference_mode inside forward")  # fmt: skip


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, s):
        ctx.s = s
        return F.hardtanh(x) * s

    @staticmethod
    def backward(ctx, g):
        return g * ctx.s, None


_LIB = torch.library.Library("kssweep", "DEF")
_LIB.define("twice(Tensor x) -> Tensor")
_LIB.define("thrice(Tensor x) -> Tensor")
_LIB.impl("twice", lambda x: torch.mul(x, 2), "CPU")


@torch.library.custom_op("kssweep::gelu_plus", mutates_args=())
def _gelu_plus(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x) + 1


@_gelu_plus.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("kssweep::nofake", mutates_args=())
def _nofake(x: torch.Tensor) -> torch.Tensor:
    return x.exp()


_LIB.impl("thrice", lambda x: x * 3, "CompositeImplicitAutograd")


class CustomOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        y = Scale.apply(self.fc(x), 2.0)
        y = torch.ops.kssweep.twice(y) + torch.ops.kssweep.thrice(y)
        return torch.ops.kssweep.gelu_plus(y) + torch.ops.kssweep.nofake(y)


def custom_ops():
    return _w("custom_ops", CustomOps().eval(),
              description="an autograd.Function, torch.library ops with and without a fake kernel")  # fmt: skip


class Logged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class Dispatched(torch.Tensor):
    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, strides=inner.stride())

    def __init__(self, inner):
        self.inner = inner

    def __repr__(self):
        return f"Dispatched({self.inner!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda t: t.inner if isinstance(t, Dispatched) else t  # noqa: E731
        out = func(*torch.utils._pytree.tree_map(unwrap, args), **torch.utils._pytree.tree_map(unwrap, kwargs or {}))
        return torch.utils._pytree.tree_map(lambda t: Dispatched(t) if isinstance(t, torch.Tensor) else t, out)


class Unwraps(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x, d):
        y = self.mlp(x)
        return y, (F.relu(d) + 1).inner


def tensor_subclasses():
    x, d = _x().as_subclass(Logged), Dispatched(_x())
    return _w("tensor_subclasses", Unwraps().eval(), samples=[((x, d), {})],
              description="__torch_function__ and __torch_dispatch__ subclasses as inputs")  # fmt: skip


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    extra: dict


class Outputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x) -> Output:
        y = self.mlp(x)
        return Output(logits=y, extra={"soft": F.softmax(y, -1), "gen": list(self._steps(y))})

    def _steps(self, y) -> Iterator[torch.Tensor]:
        for _ in range(2):
            y = F.silu(y)
            yield y


def outputs_dataclass_generator():
    return _w("outputs_dataclass_generator", Outputs().eval(),
              description="a dataclass output with a dict and a generator's items")  # fmt: skip


class Threaded(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Mlp(), Mlp()

    def forward(self, x):
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        out = {}
        worker = threading.Thread(target=lambda: out.update(b=self.b(x)))
        worker.start()
        out["a"] = self.a(x)
        worker.join()
        torch.set_num_threads(threads)
        return out["a"] + out["b"]


def threads():
    return _w("threads", Threaded().eval(), description="a worker thread and torch.set_num_threads in forward")


class Aliases(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        x = relu(self.fc(x))  # noqa: F405 (from torch.nn.functional import *)
        x = F.__dict__["silu"](x)
        x = getattr(F, "softmax")(x, dim=-1)  # noqa: B009
        x = torch.ops.aten.addmm.default(self.fc.bias, x, self.fc.weight.t())
        x = torch.ops.aten.gelu(x)
        return torch._C._nn.linear(x, self.fc.weight)


def aliases_and_aten():
    return _w("aliases_and_aten", Aliases().eval(),
              description="functionals by star import, __dict__, getattr; torch.ops.aten; torch._C._nn")  # fmt: skip


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x, buf):
        buf.clamp_(max=1.0).abs_()  # the input itself changed (idempotent: the same outputs every pass)
        x.relu_()
        return self.fc(x) + buf


def inplace_inputs():
    x, buf = _x(), _x()
    return _w("inplace_inputs", InPlace().eval(), samples=[((x, buf), {})], description="in-place ops on inputs")


class Config:
    def __init__(self, scale):
        self.scale = scale


@dataclasses.dataclass
class Batch:
    x: torch.Tensor
    mask: torch.Tensor | None


class Odd(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, batch, mode, cfg, big, nothing=None, **kw):
        y = self.fc(batch.x) * cfg.scale + (big % 7)
        if batch.mask is not None:
            y = y.masked_fill(batch.mask, 0.0)
        return F.dropout(y, p=0.0, training=False) if mode == "eval" else y


def odd_samples():
    batch = Batch(_x(), _x() > 1)
    samples = [((batch, "eval", Config(2.0), 2**100), {"nothing": None, "tag": b"bytes", "n": [1, (2, None)]}),
               ((Batch(_x(2, 16), None), "train", Config(0.5), -(2**70)), {})]  # fmt: skip
    return _w("odd_samples", Odd().eval(), samples=samples,
              description="strings, None, custom objects, huge ints, tensors inside dataclasses")  # fmt: skip


def empty_samples():
    # no forward runs: nothing to raise from in the check of a model that raises
    return _w("empty_samples", Mlp().eval(), samples=[], description="an empty sample list", no_raise_check=True)


def no_warm_up():
    return _w("no_warm_up", Mlp().eval(), description="warmup_iterations=0", warmup=0)


MORE_MECHANISMS = {f.__name__: f for f in (
    func_transforms, autocast_bf16, channels_last, complex_and_integer, nested_jagged, checkpoint_inference_mode,
    custom_ops, tensor_subclasses, outputs_dataclass_generator, threads, aliases_and_aten, inplace_inputs,
    odd_samples, empty_samples, no_warm_up,
)}  # fmt: skip
