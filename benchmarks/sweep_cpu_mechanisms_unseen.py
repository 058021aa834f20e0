"""Programs no other sweep file tries, for cpu_sweep.py: AOTInductor packages (called as the model and inside a
forward), max-autotune and dynamic-shape compiles on shapes that vary between passes, torch.compiler.disable regions,
nested compiled functions, FlexAttention (eager and compiled) and sdpa_kernel contexts, torch.while_loop and scan
eager and under compile, custom ops with autograd and fake kernels eager and under compile. Loaded programs, module
classes, hooks and modes: sweep_cpu_mechanisms_unseen_more.py; transformers architectures the other sweeps leave
out: sweep_cpu_models_unseen.py."""

from __future__ import annotations

import tempfile

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, Net, _w, _x
from torch import nn

# --- AOTInductor, compile modes ---------------------------------------------------------------------------------


def _aoti_package(model: nn.Module, example: tuple):
    if torch.get_default_device().type != "cpu":  # a skip, not a result: the crash is torch's, before any recording
        raise RuntimeError("aoti_load_package crashed the process under a CUDA default device (H100, torch 2.11)")
    program = torch.export.export(model, example)
    path = tempfile.mkdtemp(prefix="ks_aoti_") + "/model.pt2"
    torch._inductor.aoti_compile_and_package(program, package_path=path)
    return torch._inductor.aoti_load_package(path)


def aoti_as_model():
    runner = _aoti_package(Net().eval(), (_x(),))
    holder = nn.Module()  # the runner is no nn.Module: the watched module is an empty one
    return _w("aoti_as_model", holder, fn=runner, description="an AOTInductor package called as the model")


class HoldsAoti(nn.Module):
    def __init__(self):
        super().__init__()
        self.runner = _aoti_package(Mlp().eval(), (_x(),))
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(F.relu(self.runner(x)))


def aoti_in_forward():
    return _w("aoti_in_forward", HoldsAoti().eval(), description="an AOTInductor package called inside a forward")


def compile_max_autotune():
    model = torch.compile(Net().eval(), mode="max-autotune-no-cudagraphs")
    return _w("compile_max_autotune", model, description='torch.compile(mode="max-autotune-no-cudagraphs")')


def compile_dynamic_varying():
    model = torch.compile(Net().eval(), dynamic=True)
    samples = [((_x(n, 16),), {}) for n in (2, 3, 5, 9)]
    return _w("compile_dynamic_varying", model, samples=samples,
              description="torch.compile(dynamic=True), four batch sizes in a pass")  # fmt: skip


class DisabledRegion(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Mlp(), Mlp()

    @torch.compiler.disable
    def eager_part(self, x):
        return F.softplus(self.b(x))

    def forward(self, x):
        return self.eager_part(F.silu(self.a(x)))


def compiler_disable():
    return _w("compiler_disable", torch.compile(DisabledRegion().eval()),
              description="torch.compiler.disable on a method of a compiled model")  # fmt: skip


@torch.compile(backend="inductor")
def _inner(x):
    return F.gelu(x) * 3


@torch.compile(backend="aot_eager")
def _outer(x, fc):
    return _inner(fc(x)) + F.silu(x)


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return _outer(x, self.fc) + _inner(x)


def compile_nested():
    return _w("compile_nested", Nested().eval(), description="a compiled function calling another compiled one")


# --- attention ----------------------------------------------------------------------------------------------------


def _causal(b, h, q, kv):
    return q >= kv


class Flex(nn.Module):
    def __init__(self, compiled: bool):
        super().__init__()
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        self.qkv, self.out = nn.Linear(32, 96), nn.Linear(32, 32)
        self.mask = create_block_mask(_causal, None, None, 128, 128, device="cpu")
        self.attend = torch.compile(flex_attention) if compiled else flex_attention

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 2, 16).permute(2, 0, 3, 1, 4)
        y = self.attend(q, k, v, block_mask=self.mask, score_mod=lambda s, b_, h, i, j: s - (i - j).abs() * 0.1)
        return self.out(y.transpose(1, 2).reshape(b, t, 32))


def flex_attention_eager():
    return _w("flex_attention_eager", Flex(False).eval(), samples=[((torch.randn(2, 128, 32),), {})],
              description="FlexAttention eager, block mask and score_mod")  # fmt: skip


def flex_attention_compiled():
    return _w("flex_attention_compiled", Flex(True).eval(), samples=[((torch.randn(2, 128, 32),), {})],
              description="FlexAttention compiled, block mask and score_mod")  # fmt: skip


class SdpaContexts(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(32, 96)

    def forward(self, x):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        q, k, v = self.qkv(x).view(2, 8, 3, 2, 16).permute(2, 0, 3, 1, 4)
        with sdpa_kernel(SDPBackend.MATH):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):
            b = F.scaled_dot_product_attention(q, k, v)
        return a + b


def sdpa_kernel_contexts():
    return _w("sdpa_kernel_contexts", SdpaContexts().eval(), samples=[((torch.randn(2, 8, 32),), {})],
              description="sdpa_kernel contexts around SDPA calls")  # fmt: skip


# --- control flow and custom ops under compile ---------------------------------------------------------------------


class Loops(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        from torch._higher_order_ops.scan import scan

        def body(i, h):
            return i + 1, torch.tanh(self.fc(h))

        _, h = torch._higher_order_ops.while_loop(lambda i, h: i < 3, body, (torch.tensor(0), x))

        def step(carry, xs):
            carry = F.gelu(carry + xs)
            return carry, carry * 2

        carry, ys = scan(step, h[0], h)
        return ys.sum(0) + carry


def while_loop_scan_compiled():
    return _w("while_loop_scan_compiled", torch.compile(Loops().eval(), fullgraph=True),
              description="torch.while_loop and scan inside a compiled model")  # fmt: skip


def while_loop_scan_eager():
    return _w("while_loop_scan_eager", Loops().eval(), description="torch.while_loop and scan, eager")


@torch.library.custom_op("ksunseen::scaled_gelu", mutates_args=())
def _scaled_gelu(x: torch.Tensor, scale: float) -> torch.Tensor:
    return F.gelu(x) * scale


@_scaled_gelu.register_fake
def _(x, scale):
    return torch.empty_like(x)


def _scaled_gelu_backward(ctx, grad):
    return grad * ctx.scale, None


def _scaled_gelu_setup(ctx, inputs, output):
    ctx.scale = inputs[1]


_scaled_gelu.register_autograd(_scaled_gelu_backward, setup_context=_scaled_gelu_setup)


class UsesCustomOp(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        return self.b(_scaled_gelu(self.a(x), 0.5))


def custom_op_autograd_eager():
    return _w("custom_op_autograd_eager", UsesCustomOp().eval(),
              description="custom_op with register_autograd and register_fake, eager")  # fmt: skip


def custom_op_autograd_compiled():
    return _w("custom_op_autograd_compiled", torch.compile(UsesCustomOp().eval()),
              description="custom_op with register_autograd and register_fake, compiled")  # fmt: skip


UNSEEN_MECHANISMS = {f.__name__: f for f in (
    aoti_as_model, aoti_in_forward, compile_max_autotune, compile_dynamic_varying, compiler_disable, compile_nested,
    flex_attention_eager, flex_attention_compiled, sdpa_kernel_contexts, while_loop_scan_compiled,
    while_loop_scan_eager, custom_op_autograd_eager, custom_op_autograd_compiled,
)}  # fmt: skip
