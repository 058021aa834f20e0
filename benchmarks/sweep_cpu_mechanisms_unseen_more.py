"""More programs no other sweep file tries, for cpu_sweep.py: TorchScript and exported programs loaded from bytes,
exports with a dynamic dimension, FX and PT2E quantization, fused conv-bn, fp16 autocast, a float64 default dtype,
``__slots__`` modules, container subclasses with forwards of their own, ``nn.Module.__call__`` replaced by another
library, forwards returning generators, hooks with kwargs, TorchFunctionModes around the forward's calls."""

from __future__ import annotations

import functools
import io

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Net, _w, _x
from torch import nn

# --- loaded programs, quantization, fusion, dtypes ---------------------------------------------------------------


def jit_load_bytes():
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(Net().eval()), buffer)
    buffer.seek(0)
    return _w("jit_load_bytes", torch.jit.load(buffer), description="torch.jit.load of a ScriptModule from bytes")


def export_load_bytes():
    buffer = io.BytesIO()
    torch.export.save(torch.export.export(Net().eval(), (_x(),)), buffer)
    buffer.seek(0)
    model = torch.export.load(buffer).module()
    return _w("export_load_bytes", model, description="torch.export.load of a saved ExportedProgram, .module()")


class ConvBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.conv2 = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Conv2d(8, 4, 3)

    def forward(self, x):
        return self.conv2(F.relu(self.bn(self.conv(x))))


def quantized_fx():
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    example = torch.randn(2, 3, 12, 12)
    prepared = prepare_fx(ConvBn().eval(), get_default_qconfig_mapping("x86"), (example,))
    prepared(example)
    model = convert_fx(prepared)
    return _w("quantized_fx", model, samples=[((example,), {})], description="FX-mode quantization (prepare/convert)")


def fused_conv_bn():
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    model = ConvBn().eval()
    model.conv = fuse_conv_bn_eval(model.conv, model.bn)
    model.bn = nn.Identity()
    return _w("fused_conv_bn", model, samples=[((torch.randn(2, 3, 12, 12),), {})],
              description="torch.nn.utils.fusion.fuse_conv_bn_eval")  # fmt: skip


class Autocast16(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Net()

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.float16):
            return self.net(x)


def autocast_fp16():
    return _w("autocast_fp16", Autocast16().eval(), description='torch.autocast("cpu", dtype=torch.float16)')


def default_float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        model, x = Net().eval(), _x()
    finally:
        torch.set_default_dtype(previous)
    return _w("default_float64", model, samples=[((x,), {})], description="a model built under a float64 default")


# --- module classes -------------------------------------------------------------------------------------------------


class Slotted(nn.Module):
    __slots__ = ("scale",)

    def __init__(self):
        super().__init__()
        self.scale = 2.0
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return F.silu(self.fc(x)) * self.scale


class ListWithForward(nn.ModuleList):
    def forward(self, x):
        for layer in self:
            x = F.relu(layer(x))
        return x


class DictWithForward(nn.ModuleDict):
    def forward(self, x):
        return self["up"](x) + F.gelu(self["side"](x))


class SequentialOverride(nn.Sequential):
    def forward(self, x):
        return super().forward(x) + F.tanh(self[0](x))


class Containers(nn.Module):
    def __init__(self):
        super().__init__()
        self.slotted = Slotted()
        self.listed = ListWithForward([nn.Linear(16, 16), nn.Linear(16, 16)])
        self.keyed = DictWithForward({"up": nn.Linear(16, 16), "side": nn.Linear(16, 16)})
        self.seq = SequentialOverride(nn.Linear(16, 16), nn.LayerNorm(16))

    def forward(self, x):
        return self.seq(self.keyed(self.listed(self.slotted(x))))


def container_subclasses():
    return _w(
        "container_subclasses",
        Containers().eval(),
        description="__slots__ module; ModuleList, ModuleDict, Sequential subclasses with their own forward",
    )


_ORIGINAL_CALL = nn.Module.__call__


def _install_call_wrapper():
    @functools.wraps(_ORIGINAL_CALL)
    def wrapped_call(self, *args, **kwargs):
        return _ORIGINAL_CALL(self, *args, **kwargs)

    nn.Module.__call__ = wrapped_call


def _remove_call_wrapper():
    nn.Module.__call__ = _ORIGINAL_CALL


def module_call_replaced():
    _install_call_wrapper()
    return _w("module_call_replaced", Net().eval(), cleanup=_remove_call_wrapper,
              description="nn.Module.__call__ replaced globally by another library before profile()")  # fmt: skip


# --- more mechanisms ----------------------------------------------------------------------------------------------


def quantized_pt2e():
    from torch.ao.quantization.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torch.ao.quantization.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    example = torch.randn(2, 3, 12, 12)
    graph = torch.export.export(ConvBn().eval(), (example,)).module()
    prepared = prepare_pt2e(graph, X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()))
    prepared(example)
    model = convert_pt2e(prepared)
    return _w("quantized_pt2e", model, samples=[((example,), {})], description="PT2E quantization (prepare/convert)")


def export_dynamic_shapes():
    batch = torch.export.Dim("batch", min=2, max=64)
    program = torch.export.export(Net().eval(), (_x(4, 16),), dynamic_shapes=({0: batch},))
    samples = [((_x(n, 16),), {}) for n in (2, 5, 11)]
    return _w("export_dynamic_shapes", program.module(), samples=samples,
              description="torch.export with a dynamic batch dimension, three batch sizes")  # fmt: skip


class LazyOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def heads(self, x):
        for layer in (self.a, self.b):
            yield F.gelu(layer(x))  # runs when the caller iterates, after forward returned

    def forward(self, x):
        return self.heads(x)


class ConsumesGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.lazy = LazyOutputs()

    def forward(self, x):
        return torch.stack(list(self.lazy(x)))


def generator_forward():
    return _w("generator_forward", ConsumesGenerator().eval(),
              description="a submodule whose forward returns a generator its caller consumes",
              modules={"gelu": {"lazy"}, "torch.stack": {""}}, calls={"gelu": 2})  # fmt: skip


class KwargHooks(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Net()
        self.net.a.register_forward_pre_hook(lambda m, args, kwargs: ((args[0] * 2,), kwargs), with_kwargs=True)
        self.net.b.register_forward_hook(lambda m, args, kwargs, out: F.silu(out), with_kwargs=True,
                                         always_call=True)  # fmt: skip
        self.net.head.register_forward_hook(lambda m, args, out: out + F.softplus(args[0]).sum(), prepend=True)

    def forward(self, x):
        return self.net(x)


def hooks_with_kwargs():
    return _w("hooks_with_kwargs", KwargHooks().eval(),
              description="hooks with_kwargs, always_call and prepend calling functionals")  # fmt: skip


class Counting(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class InModes(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Net()

    def forward(self, x):
        with torch.device("cpu"), Counting():
            return self.net(x) + torch.ones(4)


def function_modes():
    return _w(
        "function_modes",
        InModes().eval(),
        description="torch.device() and a TorchFunctionMode of the user's around the forward's calls",
    )


UNSEEN_MORE_MECHANISMS = {f.__name__: f for f in (
    jit_load_bytes, export_load_bytes, quantized_fx, fused_conv_bn, autocast_fp16, default_float64,
    container_subclasses, module_call_replaced, quantized_pt2e, export_dynamic_shapes, generator_forward,
    hooks_with_kwargs, function_modes,
)}  # fmt: skip
