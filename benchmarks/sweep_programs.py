"""Programs for the model sweep (model_sweep.py) that use the GPU in ways models rarely do: side streams, copies
both ways, FlexAttention (compiled Triton inside a higher-order op), each SDPA backend, fp8 and int8 matmuls,
the user's own NVTX and record_function ranges, a decoder's generate() with a KV cache, and a custom autograd
Function, eager and compiled."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from workload import DEVICE, HALF, Workload


class _SideStreams(nn.Module):
    """Two matmuls on side streams joined back, as overlap code does."""

    def __init__(self):
        super().__init__()
        self.left, self.right = nn.Linear(512, 512), nn.Linear(512, 512)
        self.streams = (torch.cuda.Stream(), torch.cuda.Stream())

    def forward(self, x):
        main = torch.cuda.current_stream()
        outs = []
        for stream, layer in zip(self.streams, (self.left, self.right), strict=True):
            stream.wait_stream(main)
            with torch.cuda.stream(stream):
                outs.append(layer(x))
        for stream in self.streams:
            main.wait_stream(stream)
        return outs[0] + outs[1]


def side_streams() -> Workload:
    model = _SideStreams().to(DEVICE, HALF).eval()
    x = torch.randn(256, 512, device=DEVICE, dtype=HALF)
    return Workload("side_streams", model, [((x,), {})], model, "two Linears on side streams, joined back")


class _Copies(nn.Module):
    """Host to device from pinned memory (non_blocking), work, and back to the host."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, host):
        x = host.to(DEVICE, non_blocking=True)
        y = F.relu(self.fc(x))
        y.zero_()
        return y.to("cpu")


def copies() -> Workload:
    model = _Copies().to(DEVICE).eval()
    host = torch.randn(512, 256).pin_memory()
    return Workload("copies", model, [((host,), {})], model, "pinned H2D (non_blocking), Linear, memset, D2H")


class _Flex(nn.Module):
    def __init__(self):
        super().__init__()
        from torch.nn.attention.flex_attention import flex_attention

        self.attend = torch.compile(flex_attention)
        self.qkv = nn.Linear(256, 768)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, 4, 64).permute(2, 0, 3, 1, 4)
        return self.attend(q, k, v, score_mod=lambda score, b, h, q_idx, kv_idx: score + (q_idx - kv_idx) * 0.01)


def flex_attention() -> Workload:
    model = _Flex().to(DEVICE, HALF).eval()
    x = torch.randn(2, 256, 256, device=DEVICE, dtype=HALF)
    description = "compiled FlexAttention with a score_mod"
    return Workload("flex_attention", model, [((x,), {})], model, description, compiled=True)


class _SdpaBackends(nn.Module):
    def forward(self, q, k, v):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        outs = []
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH,
                        SDPBackend.CUDNN_ATTENTION):  # fmt: skip
            with sdpa_kernel(backend):
                outs.append(F.scaled_dot_product_attention(q, k, v, is_causal=True))
        return torch.stack(outs)


def sdpa_backends() -> Workload:
    model = _SdpaBackends()
    q, k, v = (torch.randn(2, 8, 256, 64, device=DEVICE, dtype=HALF) for _ in range(3))
    return Workload("sdpa_backends", model, [((q, k, v), {})], model, "SDPA under each of its four backends")


class _LowPrecision(nn.Module):
    def forward(self, a, b, scale, ints, int_weights):
        fp8 = torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
        return fp8.float().sum() + torch._int_mm(ints, int_weights).float().sum()


def low_precision() -> Workload:
    a = torch.randn(256, 512, device=DEVICE).to(torch.float8_e4m3fn)
    b = torch.randn(256, 512, device=DEVICE).to(torch.float8_e4m3fn).t()
    scale = torch.tensor(1.0, device=DEVICE)
    ints = torch.randint(-8, 8, (256, 512), device=DEVICE, dtype=torch.int8)
    int_weights = torch.randint(-8, 8, (512, 256), device=DEVICE, dtype=torch.int8)
    model = _LowPrecision()
    return Workload("low_precision", model, [((a, b, scale, ints, int_weights), {})], model, "fp8 _scaled_mm, _int_mm")


class _UserRanges(nn.Module):
    """The user's own NVTX range and record_function scope around calls (one named like a kernelscope scope)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        torch.cuda.nvtx.range_push("user nvtx")
        with torch.profiler.record_function("user::stage"):
            y = self.fc(x)
        with torch.profiler.record_function("ks.fn:not_ours#0"):
            y = F.gelu(y)
        torch.cuda.nvtx.range_pop()
        return y


def user_ranges() -> Workload:
    model = _UserRanges().to(DEVICE, HALF).eval()
    x = torch.randn(128, 256, device=DEVICE, dtype=HALF)
    return Workload("user_ranges", model, [((x,), {})], model, "NVTX and record_function ranges of the user's own")


def small_llama(max_positions: int = 512) -> nn.Module:
    """A 2-layer Llama of random weights (GQA, vocabulary 4000), fp16, for the generate() programs."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=4000, hidden_size=256, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=max_positions, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )  # fmt: skip
    return LlamaForCausalLM(config).to(DEVICE, HALF).eval()


def hf_llama_generate() -> Workload:
    model = small_llama()
    ids = torch.randint(3, 4000, (2, 32), device=DEVICE)

    def generate():
        return model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False, use_cache=True)

    return Workload("hf_llama_generate", generate, None, model, "Llama generate(), 8 new tokens, KV cache")


class _Gate(torch.autograd.Function):
    """An extension-style autograd Function: a sigmoid gate through torch.ops (no patched call sees it)."""

    @staticmethod
    def forward(ctx, x):
        return x * torch.ops.aten.sigmoid.default(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class _Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        return _Gate.apply(self.fc(x))


def autograd_function() -> Workload:
    model = _Gated().to(DEVICE, HALF).eval()
    x = torch.randn(128, 256, device=DEVICE, dtype=HALF)
    return Workload("autograd_function", model, [((x,), {})], model, "a custom autograd Function in a forward")


def autograd_function_compiled() -> Workload:
    model = _Gated().to(DEVICE, HALF).eval()
    compiled = torch.compile(model)
    x = torch.randn(128, 256, device=DEVICE, dtype=HALF)
    description = "torch.compile of a forward calling a custom autograd Function"
    return Workload("autograd_function_compiled", compiled, [((x,), {})], compiled, description, compiled=True)


PROGRAMS = [
    autograd_function, autograd_function_compiled, side_streams, copies, flex_attention, sdpa_backends,
    low_precision, user_ranges, hf_llama_generate,
]  # fmt: skip
