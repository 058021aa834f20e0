"""Programs for cpu_sweep.py that reach a module's code in ways the other sweep files do not: forwards called as
``child.forward(x)``, through ``super()`` or through the class on another instance; forwards that return generators,
coroutines and async generators; lazy modules and submodules made at the first call or in every forward; a traced
submodule in an eager parent; a ``torch._dynamo.disable``d submodule in a compiled parent; a compiled model
recompiled for new shapes; orthogonal and custom parametrizations that call functionals; a ``torch.library`` op with
a Python CompositeImplicitAutograd kernel; functionals called with every argument as a keyword and through their
in-place aliases; ``jacrev``, ``jvp``, ``hessian`` and ``vmap`` of a submodule; grad-enabled and inference-mode passes.

Each program states what a user expects of its rows (cpu_sweep.py checks it): ``modules``, the modules the rows of a
call have; ``calls``, how many times a call is made in a pass (its ``function_data`` counts, summed). ``fresh``: a
factory of a model like the profiled one, for the sweep's unprofiled passes, so that profile() makes the model's first
call (lazy modules).
"""

from __future__ import annotations

import asyncio

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, _w, _x
from torch import nn

# --- forwards reached without nn.Module.__call__ ------------------------------------------------------------------


class Scaled(nn.Linear):
    def forward(self, x):
        return F.softsign(super().forward(x))


class CallsForwardsDirectly(nn.Module):
    def __init__(self):
        super().__init__()
        self.child, self.scaled = Mlp(), Scaled(16, 16)

    def forward(self, x):
        x = self.child.forward(x)  # the bound method: no hooks, no __call__
        return F.hardswish(self.scaled(x))


def direct_forward_calls():
    return _w("direct_forward_calls", CallsForwardsDirectly().eval(), description="child.forward(x); super().forward() "
              "of an nn.Linear subclass", modules={"gelu": {"child"}, "layer_norm": {"child.norm"},
              "softsign": {"scaled"}, "hardswish": {""}}, calls={"gelu": 1, "softsign": 1, "linear": 3})  # fmt: skip


class CallsThroughTheClass(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = Mlp()

    def forward(self, x):
        return F.hardswish(type(self.child).forward(self.child, x))  # the class's function, on another instance


def class_forward_call():
    return _w("class_forward_call", CallsThroughTheClass().eval(), description="Class.forward(child, x) called by "
              "the parent", modules={"gelu": {"child"}, "layer_norm": {"child.norm"}, "hardswish": {""}})  # fmt: skip


# --- forwards whose results run later -----------------------------------------------------------------------------


class Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(16, 16)

    def forward(self, x):
        for row in x:
            yield F.mish(self.embed(row))


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.scale = nn.Linear(16, 16), 0.5

    async def forward(self, x):
        await asyncio.sleep(0)
        return F.silu(self.fc(x)) * self.scale


class Chunks(nn.Module):
    async def forward(self, x):
        for chunk in x.chunk(2):
            await asyncio.sleep(0)
            yield F.softplus(chunk)


class Pipeline(nn.Module):
    """A generator forward consumed by a coroutine that awaits a coroutine forward and an async generator forward."""

    def __init__(self):
        super().__init__()
        self.tokens, self.gate, self.chunks = Tokens(), Gate(), Chunks()

    def forward(self, x):
        async def run():
            y = await self.gate(torch.stack(list(self.tokens(x))))
            return torch.cat([F.tanh(part) async for part in self.chunks(y)])

        coroutine = run()
        while True:  # asyncio.run would also repr its task's result (a tensor): its own calls, not the model's
            try:
                coroutine.send(None)
            except StopIteration as done:
                return done.value


def lazy_results():
    return _w("lazy_results", Pipeline().eval(), description="forwards that return a generator, a coroutine and an "
              "async generator, consumed by their parent",
              modules={"mish": {"tokens"}, "silu": {"gate"}, "softplus": {"chunks"}, "tanh": {""}},
              calls={"mish": 4, "silu": 1, "softplus": 2, "tanh": 2})  # fmt: skip


# --- modules that change between the warm-up and the recorded pass ------------------------------------------------


class Lazy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.conv, self.norm = nn.LazyLinear(16), nn.LazyConv1d(4, 3), nn.LazyBatchNorm1d()

    def forward(self, x):
        with torch.random.fork_rng():  # the same weights in the copy the sweep's unprofiled passes run
            torch.manual_seed(1)
            return F.elu(self.norm(self.conv(self.fc(x).unsqueeze(1))))


def lazy_modules():
    return _w("lazy_modules", Lazy().eval(), fresh=lambda: Lazy().eval(),
              description="LazyLinear, LazyConv1d, LazyBatchNorm1d (built at the first call, an unpatched warm-up)",
              modules={"linear": {"fc"}, "conv1d": {"conv"}, "batch_norm": {"norm"}, "elu": {""}})  # fmt: skip


def lazy_modules_one_warm_up():
    return _w("lazy_modules_one_warm_up", Lazy().eval(), warmup=1, fresh=lambda: Lazy().eval(),
              description="lazy modules built at the first call, which is profile()'s one patched warm-up",
              modules={"linear": {"fc"}, "conv1d": {"conv"}, "batch_norm": {"norm"}, "elu": {""}})  # fmt: skip


class BuildsAtFirstCall(nn.Module):
    """Registers a submodule at its first forward (as models that size a projection from their first input do), and
    makes an unregistered one in every forward."""

    def __init__(self):
        super().__init__()
        self.proj = None
        self.register_buffer("scratch_weight", torch.eye(16))

    def forward(self, x):
        if self.proj is None:
            with torch.random.fork_rng():  # the same weights in the copy the sweep's unprofiled passes run
                torch.manual_seed(1)
                self.proj = Mlp(x.shape[-1])
        scratch = nn.Linear(16, 16, bias=False)
        with torch.no_grad():
            scratch.weight.copy_(self.scratch_weight)
        return F.relu6(scratch(self.proj(x)))


def built_in_forward():
    return _w("built_in_forward", BuildsAtFirstCall().eval(), fresh=lambda: BuildsAtFirstCall().eval(),
              description="a submodule registered at the first forward; an unregistered Linear made in every forward",
              modules={"gelu": {"proj"}, "layer_norm": {"proj.norm"}, "relu6": {""}})  # fmt: skip


# --- compiled and traced parts ------------------------------------------------------------------------------------


class TracedInside(nn.Module):
    def __init__(self):
        super().__init__()
        self.traced, self.head = torch.jit.trace(Mlp().eval(), (_x(),)), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(F.selu(self.traced(x)))


def jit_trace_submodule():
    return _w("jit_trace_submodule", TracedInside().eval(), description="a torch.jit.trace'd submodule in an eager "
              "parent", modules={"selu": {""}, "linear": {"head"}})  # fmt: skip


class NotCompiled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    @torch._dynamo.disable
    def forward(self, x):
        return F.logsigmoid(self.fc(x))


class CompiledParent(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.eager, self.last = nn.Linear(16, 16), NotCompiled(), nn.Linear(16, 16)

    def forward(self, x):
        return self.last(F.gelu(self.eager(self.first(x))))


def dynamo_disabled_submodule():
    model = torch.compile(CompiledParent().eval(), backend="inductor")
    return _w("dynamo_disabled_submodule", model, description="a torch._dynamo.disable'd submodule inside a "
              "compiled parent")  # fmt: skip


def compiled_recompiles():
    model = torch.compile(Mlp().eval(), backend="aot_eager")
    samples = [((_x(n, 16),), {}) for n in (2, 3, 9)]
    return _w("compiled_recompiles", model, samples=samples, description="a compiled model recompiled for new shapes "
              "(automatic dynamic) in its first pass")  # fmt: skip


# --- functionals inside attribute access, ops and transforms ------------------------------------------------------


class Positive(nn.Module):
    def forward(self, w):
        return F.softplus(w)


class Parametrized(nn.Module):
    def __init__(self):
        super().__init__()
        self.rotation = nn.utils.parametrizations.orthogonal(nn.Linear(16, 16))
        self.positive = nn.Linear(16, 16)
        nn.utils.parametrize.register_parametrization(self.positive, "weight", Positive())

    def forward(self, x):
        return self.positive(self.rotation(x))


def parametrized_functionals():
    return _w("parametrized_functionals", Parametrized().eval(), description="parametrizations.orthogonal and a "
              "register_parametrization whose module calls F.softplus, run at every weight access",
              modules={"softplus": {"positive.parametrizations.weight.0"}}, calls={"softplus": 1})  # fmt: skip


_LIBRARY = torch.library.Library("kernelscope_sweep", "DEF")
_LIBRARY.define("gated(Tensor x, Tensor w) -> Tensor")


def _gated(x, w):
    return F.linear(x, w) * F.sigmoid(x)


_LIBRARY.impl("gated", _gated, "CompositeImplicitAutograd")


class LibraryOp(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 16))

    def forward(self, x):
        return torch.ops.kernelscope_sweep.gated(x, self.w)


def library_composite_op():
    return _w("library_composite_op", LibraryOp().eval(), description="a torch.library op with a Python "
              "CompositeImplicitAutograd kernel that calls functionals", modules={"linear": {""}, "sigmoid": {""}},
              calls={"linear": 1, "sigmoid": 1})  # fmt: skip


class Keywords(nn.Module):
    def __init__(self):
        super().__init__()
        self.w, self.b = nn.Parameter(torch.randn(16, 16)), nn.Parameter(torch.randn(16))
        self.scale = nn.Parameter(torch.ones(16))

    def forward(self, x):
        y = F.linear(input=x, weight=self.w, bias=self.b)
        y = F.layer_norm(input=y, normalized_shape=(16,), weight=self.scale, bias=None, eps=1e-5)
        q = y.view(1, 1, 4, 16)
        y = F.scaled_dot_product_attention(query=q, key=q, value=q, is_causal=True).view(4, 16)
        y = F.dropout(input=y, p=0.5, training=False)
        return F.softmax(input=y, dim=-1)


def keyword_arguments():
    return _w("keyword_arguments", Keywords().eval(), description="functionals with every argument as a keyword",
              calls={"linear": 1, "layer_norm": 1, "scaled_dot_product_attention": 1, "softmax": 1})  # fmt: skip


class InPlaceAliases(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.slope = nn.Linear(16, 16), 0.1

    def forward(self, x):
        y = self.fc(x)
        F.relu_(y)
        F.elu_(y)
        F.leaky_relu_(y, self.slope)
        F.hardtanh_(y)
        F.threshold_(y, 0.1, 0.0)
        torch.relu_(y)
        y.relu_()
        y = F.relu(y, inplace=True)
        return torch.relu(y) + y.relu()


def inplace_aliases():
    # torch.relu_ is F.relu_ (one function, named as the functional), and F.relu(inplace=True) calls it: 3 calls
    return _w("inplace_aliases", InPlaceAliases().eval(), description="F.relu_, elu_, leaky_relu_, hardtanh_, "
              "threshold_, torch.relu_, Tensor.relu_, F.relu(inplace=True), torch.relu, Tensor.relu",
              calls={"relu_": 3, "elu_": 1, "leaky_relu_": 1, "hardtanh_": 1, "threshold_": 1, "Tensor.relu_": 1,
                     "relu": 1, "torch.relu": 1, "Tensor.relu": 1})  # fmt: skip


class Transforms(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 4)

    def forward(self, x):
        point = x[0, :4]
        jacobian = torch.func.jacrev(lambda v: F.tanh(self.inner(v)))(point)
        _, tangent = torch.func.jvp(lambda v: F.sigmoid(self.inner(v)), (point,), (torch.ones(4),))
        curvature = torch.func.hessian(lambda v: F.softplus(v).sum())(point)
        batched = torch.func.vmap(self.inner)(x[:, :4])
        return jacobian.sum() + tangent.sum() + curvature.sum() + batched.sum()


def func_transforms_more():
    return _w("func_transforms_more", Transforms().eval(), description="jacrev, jvp, hessian and vmap of a submodule "
              "in the forward", modules={"linear": {"inner"}})  # fmt: skip


# --- grad modes ---------------------------------------------------------------------------------------------------


def grad_modes():
    model = Mlp().eval()

    def passes(x):
        with torch.enable_grad():
            first = model(x)
        with torch.inference_mode():
            second = model(x)
        return first.detach() + second.clone()

    return _w("grad_modes", model, fn=passes, description="the model run grad-enabled and in inference_mode inside "
              "profile()'s no_grad", modules={"gelu": {""}, "layer_norm": {"norm"}},
              calls={"gelu": 2, "layer_norm": 2, "linear": 4})  # fmt: skip


UNSEEN3_MECHANISMS = {f.__name__: f for f in (
    direct_forward_calls, class_forward_call, lazy_results, lazy_modules, lazy_modules_one_warm_up, built_in_forward,
    jit_trace_submodule, dynamo_disabled_submodule, compiled_recompiles, parametrized_functionals, library_composite_op,
    keyword_arguments, inplace_aliases, func_transforms_more, grad_modes,
)}  # fmt: skip
