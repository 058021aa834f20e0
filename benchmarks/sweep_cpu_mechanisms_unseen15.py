"""Programs for cpu_sweep.py of kinds no earlier program file has, around ``torch.compile``: compiled functions handed
the model's modules (a ModuleList, with and without a graph break, whose resume function holds no ``self``), a compiled
method of a plain object holding children, a compiled function reading the model's encoder as a global, or its children
from a dict, a tuple and a global list, a compiled submodule whose forward breaks under an eager parent that hooks its
output, ``mode="reduce-overhead"`` with ``dynamic=True`` on the CPU, ``aot_eager`` with a break between the root's
children, a break whose resume function holds the next child on its stack, a ModuleDict of keys that are no
identifiers, a compiled child run in a thread of the forward or pre-hooked with kwargs, dynamic qint8 Linear layers,
``functional_call``, a generator expression and a jagged nested tensor, each compiled.
(sweep_cpu_mechanisms_unseen15_calls.py has forwards and calls of unusual shapes; sweep_cpu_models_unseen15.py the
transformers families.)

Each program states what a user expects of its rows (``modules``, ``calls``: cpu_sweep.py checks them): with
inductor on the CPU a compiled region's ``linear`` is an extern ``addmm`` named in its module, and its fused C++
kernels are ``torch.compile``'s rows (docs/recording.md).
"""

from __future__ import annotations

import threading

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import _w, _x
from torch import nn

# --- torch.compile around the model's modules ---------------------------------------------------------------------


@torch.compile(backend="inductor")
def _run_layers(layers, x):
    for layer in layers:
        x = F.gelu(layer(x))
    return x


class HandsLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(16, 16) for _ in range(3)])
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(_run_layers(self.layers, x))


def compiled_function_handed_modules():
    return _w("compiled_function_handed_modules", HandsLayers().eval(), description="a torch.compile'd function "
              "handed the model's ModuleList, called from its forward with no compiled module around it",
              modules={"linear": {"layers.0", "layers.1", "layers.2", "head"}})  # fmt: skip


@torch.compile(backend="inductor")
def _project_then_break(proj, x):
    y = F.silu(proj(x))
    torch._dynamo.graph_break()
    return proj(y) * 0.5


class BreaksInFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(16, 16))
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        return _project_then_break(self.proj, self.inner(x))


def compiled_function_resume_no_self():
    return _w("compiled_function_resume_no_self", BreaksInFunction().eval(), description="a compiled function "
              "handed a child, a graph break in it: its resume function holds the child, and no self",
              modules={"linear": {"inner.0", "proj"}})  # fmt: skip


_GLOBAL_ENCODER = None  # the model's encoder, read by a compiled function as a global of this file


@torch.compile(backend="inductor")
def _encode_with_global(x):
    return F.gelu(_GLOBAL_ENCODER(x))


class GlobalEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.head = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 16)), nn.Linear(16, 4)
        global _GLOBAL_ENCODER
        _GLOBAL_ENCODER = self.enc

    def forward(self, x):
        return self.head(_encode_with_global(x))


def compiled_function_global_module():
    return _w("compiled_function_global_module", GlobalEncoder().eval(), description="a compiled function that calls "
              "the model's encoder held in a global of its file (dynamo's G[...] paths)",
              modules={"linear": {"enc.0", "enc.1", "head"}})  # fmt: skip


_GLOBAL_HEADS: list = []  # one of the model's children in a global list of this file


@torch.compile(backend="inductor")
def _run_containers(mods, pair, x):
    return F.silu(mods["enc"](x)) + pair[1](x) + _GLOBAL_HEADS[0](x)


class HandsContainers(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.proj, self.extra = nn.Linear(16, 16), nn.Sequential(nn.Linear(16, 16)), nn.Linear(16, 16)
        _GLOBAL_HEADS[:] = [self.extra]

    def forward(self, x):
        return _run_containers({"enc": self.enc}, (None, self.proj), x)


def compiled_function_module_containers():
    return _w("compiled_function_module_containers", HandsContainers().eval(), description="a compiled function "
              "handed the model's children in a dict and a tuple, and reading one from a global list",
              modules={"linear": {"enc", "proj.0", "extra"}})  # fmt: skip


class Helper:
    """A plain object (not a module) holding two of the model's children, with a compiled method."""

    def __init__(self, fc, norm):
        self.fc, self.norm = fc, norm
        self.step = torch.compile(self.step, backend="inductor")

    def step(self, x):
        return self.norm(F.gelu(self.fc(x)))


class HoldsHelper(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.norm, self.out = nn.Linear(16, 16), nn.LayerNorm(16), nn.Linear(16, 4)
        self.__dict__["helper"] = Helper(self.fc, self.norm)

    def forward(self, x):
        return self.out(self.helper.step(x))


def compiled_helper_method():
    return _w("compiled_helper_method", HoldsHelper().eval(), description="the compiled method of a plain object "
              "that holds two of the model's children", modules={"linear": {"fc", "out"}})  # fmt: skip


class BreakingBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        y = F.gelu(self.fc1(x))
        if y.sum() > 0:  # data-dependent: a graph break
            y = y * 2
        return self.fc2(y)


class HooksCompiledChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.compile(BreakingBlock(), backend="inductor")
        self.block.register_forward_hook(lambda module, args, out: F.layer_norm(out, (16,)))
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(F.relu(self.block(x)))


def compiled_child_breaks_hooked():
    return _w("compiled_child_breaks_hooked", HooksCompiledChild().eval(), description="an eager model whose "
              "compiled child's forward breaks on a data-dependent branch, a forward hook on the compiled child "
              "replacing its output", modules={"linear": {"block._orig_mod.fc1", "block._orig_mod.fc2", "head"},
              "layer_norm": {"block"}, "relu": {""}})  # fmt: skip


class TwoMlps(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        return self.b(F.gelu(self.a(x)))


def compile_reduce_overhead_dynamic():
    model = torch.compile(TwoMlps().eval(), mode="reduce-overhead", dynamic=True)
    samples = [((_x(n, 16),), {}) for n in (2, 5, 7)]
    return _w("compile_reduce_overhead_dynamic", model, samples=samples, description='torch.compile(mode='
              '"reduce-overhead", dynamic=True) on the CPU, three batch sizes',
              modules={"linear": {"_orig_mod.a", "_orig_mod.b"}})  # fmt: skip


class BreaksBetweenChildren(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = TwoMlps(), TwoMlps()

    def forward(self, x):
        y = self.a(x)
        torch._dynamo.graph_break()
        return self.b(y)


def compile_aot_eager_resume():
    model = torch.compile(BreaksBetweenChildren().eval(), backend="aot_eager")
    return _w("compile_aot_eager_resume", model, description="the root compiled with aot_eager, a graph break "
              "between its two children (the second runs in a resume function)")  # fmt: skip


class BreakingHeadless(nn.Module):
    def __init__(self):
        super().__init__()
        self.block, self.head = BreakingBlock(), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.block(x))  # broken inside the block: the resume holds self.head on its stack


def compile_resume_stack_module():
    model = torch.compile(BreakingHeadless().eval(), backend="inductor")
    return _w("compile_resume_stack_module", model, description="the root compiled, a graph break inside a child "
              "called as self.head(self.block(x)): the root's resume function holds self.head on its stack, no "
              "self", modules={"linear": {"_orig_mod.block.fc1", "_orig_mod.block.fc2", "_orig_mod.head"}})  # fmt: skip


class OddKeys(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"k-v": nn.Linear(16, 16), "3": nn.Linear(16, 16), "q proj": nn.Linear(16, 16)})

    def forward(self, x):
        return sum(head(x) for head in self.heads.values())


def compiled_module_dict_odd_keys():
    model = torch.compile(OddKeys().eval(), backend="inductor")
    return _w("compiled_module_dict_odd_keys", model, description="a compiled model whose ModuleDict's keys are no "
              "identifiers (k-v, 3, a space)", modules={"linear": {"_orig_mod.heads.k-v", "_orig_mod.heads.3",
              "_orig_mod.heads.q proj"}})  # fmt: skip


class CompiledInThread(nn.Module):
    def __init__(self):
        super().__init__()
        self.worker = torch.compile(TwoMlps(), backend="inductor")
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        out = {}

        def work():
            try:
                out["y"] = self.worker(x)
            except BaseException as exc:  # noqa: BLE001 - raised again in the forward's thread
                out["raised"] = exc

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        if "raised" in out:
            raise out["raised"]
        return self.head(out["y"])


def compiled_child_in_thread():
    return _w("compiled_child_in_thread", CompiledInThread().eval(), description="a compiled child run in a "
              "thread the forward starts and joins", modules={"linear": {"worker._orig_mod.a", "worker._orig_mod.b",
              "head"}})  # fmt: skip


class KwargsScaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x, scale=1.0):
        return self.fc(x) * scale


class PreHookKwargsCompiled(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = torch.compile(KwargsScaled(), backend="inductor")
        self.child.register_forward_pre_hook(
            lambda module, args, kwargs: ((F.softplus(args[0]),), {**kwargs, "scale": 0.5}), with_kwargs=True
        )

    def forward(self, x):
        return F.tanh(self.child(x, scale=2.0))


def compiled_child_pre_hook_kwargs():
    return _w("compiled_child_pre_hook_kwargs", PreHookKwargsCompiled().eval(), description="a forward pre-hook "
              "with kwargs on a compiled child, rewriting its input and a keyword argument",
              modules={"softplus": {"child"}, "linear": {"child._orig_mod.fc"}, "tanh": {""}})  # fmt: skip


def quantized_dynamic_compiled():
    quantized = torch.ao.quantization.quantize_dynamic(TwoMlps().eval(), {nn.Linear}, dtype=torch.qint8)
    model = torch.compile(quantized, backend="inductor")
    return _w("quantized_dynamic_compiled", model, description="torch.ao dynamic qint8 Linear layers, the model "
              "then compiled with inductor")  # fmt: skip


class FunctionalCallCompiled(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = TwoMlps()
        self.delta = nn.Parameter(torch.full((16,), 0.1))

    def forward(self, x):
        params = {"a.bias": self.inner.a.bias + self.delta}
        return torch.func.functional_call(self.inner, params, (x,), strict=False)


def functional_call_compiled():
    model = torch.compile(FunctionalCallCompiled().eval(), backend="inductor")
    return _w("functional_call_compiled", model, description="torch.func.functional_call of a child with one "
              "parameter replaced, inside a compiled forward", modules={"linear": {"_orig_mod.inner.a",
              "_orig_mod.inner.b"}})  # fmt: skip


class GeneratorSum(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleList([nn.Linear(16, 16) for _ in range(3)])

    def forward(self, x):
        return sum(expert(x) for expert in self.experts) / len(self.experts)


def generator_expression_compiled():
    model = torch.compile(GeneratorSum().eval(), backend="inductor")
    return _w("generator_expression_compiled", model, description="a compiled forward summing its children over a "
              "generator expression", modules={"linear": {"_orig_mod.experts.0", "_orig_mod.experts.1",
              "_orig_mod.experts.2"}})  # fmt: skip


class JaggedChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.compile(TwoMlps(), backend="inductor", dynamic=True)

    def forward(self, a, b):
        nested = torch.nested.nested_tensor([a, b], layout=torch.jagged)
        return self.block(nested).values().sum(0)


def nested_jagged_compiled_child():
    samples = [((_x(3, 16), _x(5, 16)), {})]
    return _w("nested_jagged_compiled_child", JaggedChild().eval(), samples=samples, description="a jagged nested "
              "tensor of two sequences into a compiled child (dynamic=True)",
              modules={"linear": {"block._orig_mod.a", "block._orig_mod.b"}})  # fmt: skip


UNSEEN15_MECHANISMS = {
    "compiled_function_handed_modules": compiled_function_handed_modules,
    "compiled_function_resume_no_self": compiled_function_resume_no_self,
    "compiled_helper_method": compiled_helper_method,
    "compiled_function_global_module": compiled_function_global_module,
    "compiled_function_module_containers": compiled_function_module_containers,
    "compiled_child_breaks_hooked": compiled_child_breaks_hooked,
    "compile_reduce_overhead_dynamic": compile_reduce_overhead_dynamic,
    "compile_aot_eager_resume": compile_aot_eager_resume,
    "compile_resume_stack_module": compile_resume_stack_module,
    "compiled_module_dict_odd_keys": compiled_module_dict_odd_keys,
    "compiled_child_in_thread": compiled_child_in_thread,
    "compiled_child_pre_hook_kwargs": compiled_child_pre_hook_kwargs,
    "quantized_dynamic_compiled": quantized_dynamic_compiled,
    "functional_call_compiled": functional_call_compiled,
    "generator_expression_compiled": generator_expression_compiled,
    "nested_jagged_compiled_child": nested_jagged_compiled_child,
}
