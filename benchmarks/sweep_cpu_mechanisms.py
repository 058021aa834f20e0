"""torch mechanisms around small modules for cpu_sweep.py: torch.compile (root, submodule, method, function,
dynamic, fullgraph, graph breaks), torch.export, TorchScript, fx, dynamic quantization, parametrizations, hooks,
unusual forwards and containers, torch.func, autocast, layouts and dtypes, nested tensors, checkpointing, custom
autograd Functions and torch.library ops, tensor subclasses, unusual outputs, threads, functionals reached through
aliases, ``torch.ops.aten`` called directly, in-place ops on inputs, samples that hold non-tensors."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from workload import Workload


class Mlp(nn.Module):
    def __init__(self, d: int = 16):
        super().__init__()
        self.fc1, self.fc2, self.norm = nn.Linear(d, 2 * d), nn.Linear(2 * d, d), nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(self.fc2(F.gelu(self.fc1(x))) + x)


class Net(nn.Module):
    def __init__(self, d: int = 16):
        super().__init__()
        self.a, self.b, self.head = Mlp(d), Mlp(d), nn.Linear(d, 4)

    def forward(self, x):
        return self.head(torch.relu(self.b(self.a(x))))


def _x(*shape) -> torch.Tensor:
    return torch.randn(*(shape or (4, 16)))


def _w(name: str, model: nn.Module, fn=None, samples=None, description: str = "", **notes) -> Workload:
    samples = [((_x(),), {})] if samples is None else samples
    return Workload(name, model if fn is None else fn, samples, model, description or name, notes=notes)


# --- torch.compile --------------------------------------------------------------------------------------------


def compile_root():
    model = torch.compile(Net().eval(), backend="inductor")
    return _w("compile_root", model, description="torch.compile(model), inductor")


def compile_submodule():
    model = Net().eval()
    model.b = torch.compile(model.b, backend="eager")
    return _w("compile_submodule", model, description="a submodule compiled, backend eager")


def compile_method():
    model = Net().eval()
    model.a.forward = torch.compile(model.a.forward, backend="aot_eager")
    return _w("compile_method", model, description="a submodule's bound forward compiled, aot_eager")


@torch.compile(backend="inductor", dynamic=True)
def _fused(x, w):
    return F.silu(x @ w) * 2


class CompiledFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.w, self.fc = nn.Parameter(torch.randn(16, 16)), nn.Linear(16, 16)

    def forward(self, x):
        return self.fc(_fused(x, self.w))


def compile_function_dynamic():
    samples = [((_x(n, 16),), {}) for n in (3, 5, 7)]
    return _w("compile_function_dynamic", CompiledFunction().eval(), samples=samples,
              description="a compiled function, dynamic=True, three batch sizes")  # fmt: skip


class Breaks(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        y = F.relu(self.a(x))
        print(end="")  # a graph break
        if y.sum() > 0:  # data-dependent: another
            y = y * 2
        return self.b(y)


def compile_graph_breaks():
    return _w("compile_graph_breaks", torch.compile(Breaks().eval(), backend="inductor"),
              description="graph breaks (print, data-dependent branch)")  # fmt: skip


def compile_fullgraph_dynamic():
    model = torch.compile(Net().eval(), fullgraph=True, dynamic=True, backend="inductor")
    samples = [((_x(n, 16),), {}) for n in (2, 6)]
    return _w("compile_fullgraph_dynamic", model, samples=samples, description="fullgraph=True, dynamic=True")


# --- export, TorchScript, fx, quantization ----------------------------------------------------------------------


def export_module():
    program = torch.export.export(Net().eval(), (_x(),))
    model = program.module()
    return _w("export_module", model, description="torch.export(...).module()")


class HoldsProgram(nn.Module):
    def __init__(self):
        super().__init__()
        self.program = torch.export.export(Mlp().eval(), (_x(),))
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.program.module()(x))


def export_program_called():
    return _w("export_program_called", HoldsProgram().eval(),
              description="an ExportedProgram's module() made in the forward")  # fmt: skip


def jit_script():
    model = torch.jit.script(Net().eval())
    return _w("jit_script", model, description="torch.jit.script")


def jit_trace():
    model = torch.jit.trace(Net().eval(), (_x(),))
    return _w("jit_trace", model, description="torch.jit.trace")


class HoldsScripted(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.jit.script(Mlp().eval())
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.inner(x))


def jit_submodule():
    return _w("jit_submodule", HoldsScripted().eval(), description="a scripted submodule in an eager model")


def fx_graph_module():
    model = torch.fx.symbolic_trace(Net().eval())
    return _w("fx_graph_module", model, description="torch.fx.symbolic_trace")


def fx_transformed():
    traced = torch.fx.symbolic_trace(Net().eval())
    for node in traced.graph.nodes:
        if node.op == "call_function" and node.target is torch.relu:
            node.target = torch.nn.functional.silu
    traced.recompile()
    return _w("fx_transformed", traced, description="an fx graph rewritten (relu -> silu) and recompiled")


def quantize_dynamic():
    model = torch.ao.quantization.quantize_dynamic(Net().eval(), {nn.Linear}, dtype=torch.qint8)
    return _w("quantize_dynamic", model, description="quantize_dynamic of the Linears, qint8")


# --- parametrizations, hooks, forwards ------------------------------------------------------------------------


def weight_norm_spectral_norm():
    model = Net().eval()
    model.a.fc1 = nn.utils.parametrizations.weight_norm(model.a.fc1)
    model.head = nn.utils.parametrizations.spectral_norm(model.head)
    return _w("weight_norm_spectral_norm", model, description="weight_norm and spectral_norm parametrizations")


class Symmetric(nn.Module):
    def forward(self, w):
        return w.triu() + w.triu(1).transpose(-1, -2)


def parametrize_custom():
    model = Net().eval()
    nn.utils.parametrize.register_parametrization(model.b.fc2, "weight", nn.Identity())
    nn.utils.parametrize.register_parametrization(model.a.fc1, "bias", nn.Identity())
    square = nn.Linear(16, 16)
    nn.utils.parametrize.register_parametrization(square, "weight", Symmetric())
    model.sq = square
    model.forward = lambda x: Net.forward(model, model.sq(x))
    return _w("parametrize_custom", model, description="register_parametrization, forward on the instance")


def hooks_replace():
    model = Net().eval()
    model.a.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    model.b.register_forward_hook(lambda m, args, out: F.relu(out))
    model.b.fc1.register_forward_hook(lambda m, args, kwargs, out: out + 1, with_kwargs=True)
    model.head.register_forward_pre_hook(lambda m, args, kwargs: ((F.silu(args[0]),), kwargs), with_kwargs=True)
    return _w("hooks_replace", model, description="pre-hooks and hooks that replace inputs and outputs")


class CallOverridden(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Net()

    def __call__(self, x):
        return self.net(x) * 3

    def forward(self, x):
        raise AssertionError("never called")


def call_overridden():
    return _w("call_overridden", CallOverridden().eval(), description="__call__ overridden, forward never runs")


class StaticForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    @staticmethod
    def forward(x):
        return F.softmax(x, -1)


def forward_replaced():
    import functools

    model = Net().eval()

    def scaled(self, x, scale):
        return Net.forward(self, x) * scale

    model.forward = functools.partial(scaled, model, scale=2.0)
    model.a.forward = functools.partial(Mlp.forward, model.a)
    model.st = StaticForward()
    model.b.forward = lambda x: Mlp.forward(model.b, model.st(x))
    return _w("forward_replaced", model, description="forward as a partial, a lambda, a staticmethod")


class Holder:
    def __init__(self):
        self.layers = [nn.Linear(16, 16), nn.Linear(16, 16)]
        self.table = {"act": nn.GELU(), "norm": nn.LayerNorm(16)}


class PlainContainers(nn.Module):
    def __init__(self):
        super().__init__()
        self.holder = Holder()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        for layer in self.holder.layers:
            x = layer(x)
        return self.fc(self.holder.table["norm"](self.holder.table["act"](x)))


def plain_containers():
    model = PlainContainers().eval()
    watch = [*model.holder.layers, *model.holder.table.values()]
    return _w("plain_containers", model, description="modules in lists and dicts of a plain object", watch=watch)


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Mlp()
        self.again = self.block
        self.seq = nn.Sequential(self.block, nn.ReLU(), self.block)

    def forward(self, x):
        return self.seq(self.again(self.block(x)))


def shared_submodule():
    return _w("shared_submodule", Shared().eval(), description="one module at three paths")


class Recursive(nn.Module):
    def __init__(self, depth: int = 3):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.child = Recursive(depth - 1) if depth else None

    def forward(self, x, n: int = 2):
        x = F.relu(self.fc(x))
        if n:
            x = self.forward(x, n - 1)  # recursion through the instance's own forward
        return self.child(x) if self.child is not None else x


def recursion():
    return _w("recursion", Recursive().eval(), description="a forward calling itself, and nested instances")


MECHANISMS = {f.__name__: f for f in (
    compile_root, compile_submodule, compile_method, compile_function_dynamic, compile_graph_breaks,
    compile_fullgraph_dynamic, export_module, export_program_called, jit_script, jit_trace, jit_submodule,
    fx_graph_module, fx_transformed, quantize_dynamic, weight_norm_spectral_norm, parametrize_custom, hooks_replace,
    call_overridden, forward_replaced, plain_containers, shared_submodule, recursion,
)}  # fmt: skip
