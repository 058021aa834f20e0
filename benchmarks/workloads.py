"""The GPU workloads of sample_traces/ and the benchmarks: random-init models, no downloads.

Each factory returns a Workload (workload.py): ``fn`` called as in ``profile(fn, samples, module=module)``. More
models are in workloads_models.py, the ways of torch.compile'ing one in workloads_compiled.py; ``ALL`` lists them
all. On a machine without CUDA the models run on the CPU in float32 (smaller where noted), so the GPU check can be
tried there; the workloads that need CUDA are marked ``needs_cuda``.
"""

from __future__ import annotations

import threading

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from workload import BF16, DEVICE, HALF, Workload, needs_cuda
from workloads_compiled import COMPILE_FORMS
from workloads_models import MODELS


def resnet50() -> Workload:
    import torchvision

    model = torchvision.models.resnet50().to(DEVICE, HALF).eval()
    x = torch.randn(8, 3, 224, 224, device=DEVICE, dtype=HALF)
    return Workload("resnet50", model, [((x,), {})], model, "torchvision resnet50, batch 8, fp16, 224x224", 0)


def bert() -> Workload:
    from transformers import BertConfig, BertModel

    model = BertModel(BertConfig()).to(DEVICE, BF16).eval()
    samples = []
    for seq in (128, 64):
        ids = torch.randint(0, 30000, (8, seq), device=DEVICE)
        samples.append(((), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}))
    return Workload(
        "bert", model, samples, model, "transformers BERT-base (BertConfig()), batch 8, seq 128 and 64, bf16", 0
    )


def gpt2() -> Workload:
    from transformers import GPT2Config, GPT2Model

    model = GPT2Model(GPT2Config()).to(DEVICE, BF16).eval()
    samples = [
        ((), {"input_ids": torch.randint(0, 50000, (4, seq), device=DEVICE), "use_cache": False}) for seq in (256, 128)
    ]
    return Workload(
        "gpt2",
        model,
        samples,
        model,
        "transformers GPT-2 small (GPT2Config()), batch 4, seq 256 and 128, bf16, use_cache=False",
        0,
    )


def vit() -> Workload:
    import timm

    model = timm.create_model("vit_base_patch16_224", pretrained=False).to(DEVICE, BF16).eval()
    x = torch.randn(8, 3, 224, 224, device=DEVICE, dtype=BF16)
    return Workload("vit_b16", model, [((x,), {})], model, "timm vit_base_patch16_224, batch 8, bf16", 0)


def transformer_encoder() -> Workload:
    layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, activation="gelu", batch_first=False)
    model = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).to(DEVICE, BF16).eval()
    x = torch.randn(128, 8, 512, device=DEVICE, dtype=BF16)
    return Workload(
        "transformer_encoder",
        model,
        [((x,), {})],
        model,
        "nn.TransformerEncoder, 4 layers, d 512, 8 heads, batch_first=False, gelu, seq 128, batch 8, bf16",
        0,
    )


class UNetBlock(nn.Module):
    """A diffusion-UNet-style block: resnet (conv2d, group_norm, silu) then spatial self-attention."""

    def __init__(self, channels: int = 256, heads: int = 8):
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(32, channels), nn.Conv2d(channels, channels, 3, padding=1)
        self.norm2, self.conv2 = nn.GroupNorm(32, channels), nn.Conv2d(channels, channels, 3, padding=1)
        self.time = nn.Linear(512, channels)
        self.attn_norm = nn.GroupNorm(32, channels)
        self.qkv, self.proj = nn.Linear(channels, 3 * channels), nn.Linear(channels, channels)
        self.heads = heads

    def forward(self, x, emb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time(F.silu(emb))[:, :, None, None]
        h = x + self.conv2(F.silu(self.norm2(h)))
        b, c, hh, ww = h.shape
        t = self.attn_norm(h).flatten(2).transpose(1, 2)
        q, k, v = self.qkv(t).reshape(b, -1, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, -1, c)
        return h + self.proj(a).transpose(1, 2).reshape(b, c, hh, ww)


def unet_block() -> Workload:
    model = UNetBlock().to(DEVICE, HALF).eval()
    x = torch.randn(4, 256, 32, 32, device=DEVICE, dtype=HALF)
    emb = torch.randn(4, 512, device=DEVICE, dtype=HALF)
    return Workload(
        "unet_block",
        model,
        [((x, emb), {})],
        model,
        "UNet-style block (conv2d, group_norm, silu, sdpa, linear), 256 ch, 32x32, batch 4, fp16",
        0,
    )


def mlp() -> Workload:
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1024))
    model = model.to(DEVICE, HALF).eval()
    x = torch.randn(64, 1024, device=DEVICE, dtype=HALF)
    return Workload("mlp", model, [((x,), {})], model, "MLP 1024-4096-4096-1024 (Linear/ReLU), batch 64, fp16")


def demo() -> Workload:
    from kernelscope.demo import demo_workload

    model, samples = demo_workload(DEVICE, HALF)
    return Workload("demo", model, samples, model, "kernelscope's demo model (kernelscope demo --device cuda), fp16")


class GraphReplay(nn.Module):
    """A module whose forward replays a CUDA graph of an MLP captured once, beside an eager linear."""

    def __init__(self):
        super().__init__()
        self.pre = nn.Linear(512, 512)
        self.body = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512))
        self.graph = None

    def capture(self, x):
        self.static_in = torch.zeros_like(x)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(3):
                self.body(self.static_in)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), torch.no_grad():
            self.static_out = self.body(self.static_in)

    def forward(self, x):
        self.static_in.copy_(self.pre(x))
        self.graph.replay()
        return self.static_out.clone()


@needs_cuda
def cuda_graph() -> Workload:
    model = GraphReplay().to(DEVICE, HALF).eval()
    x = torch.randn(256, 512, device=DEVICE, dtype=HALF)
    model.capture(x)
    return Workload(
        "cuda_graph",
        model,
        [((x,), {})],
        model,
        "Linear, then torch.cuda.graph replay of Linear-GELU-Linear inside forward, batch 256, fp16",
    )


class CompiledHost(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.compile(
            nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True, norm_first=True)
        )
        self.head = nn.Linear(256, 256)

    def forward(self, x):
        return self.head(self.block(x))


def compiled() -> Workload:
    model = CompiledHost().to(DEVICE, HALF).eval()
    x = torch.randn(8, 128, 256, device=DEVICE, dtype=HALF)
    return Workload(
        "compiled",
        model,
        [((x,), {})],
        model,
        "torch.compile'd TransformerEncoderLayer (default mode) inside an eager host module, fp16",
        compiled=True,
    )


class CompiledGraphs(nn.Module):
    """A block compiled with mode="reduce-overhead": inductor replays it as CUDA graphs (cudagraph trees)."""

    def __init__(self):
        super().__init__()
        body = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512))
        self.block = torch.compile(body, mode="reduce-overhead")
        self.head = nn.Linear(512, 512)

    def forward(self, x):
        return self.head(self.block(x))


@needs_cuda
def compiled_graphs() -> Workload:
    model = CompiledGraphs().to(DEVICE, HALF).eval()
    x = torch.randn(256, 512, device=DEVICE, dtype=HALF)
    return Workload(
        "compiled_graphs",
        model,
        [((x,), {})],
        model,
        "torch.compile(mode='reduce-overhead') Linear-GELU-Linear (CUDA graphs) inside an eager host module, fp16",
        compiled=True,
    )


def _gelu_linear(x, w, b):
    return F.gelu(F.linear(x, w, b), approximate="tanh") * 0.5


class CallsCompiledFunction(nn.Module):
    """An eager module whose forward calls a torch.compile'd function (no compiled module, so no scope of its own)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(512, 2048)
        self.out = nn.Linear(2048, 512)
        self.fused = torch.compile(_gelu_linear)

    def forward(self, x):
        return self.out(self.fused(x, self.proj.weight, self.proj.bias))


def compiled_function() -> Workload:
    model = CallsCompiledFunction().to(DEVICE, HALF).eval()
    x = torch.randn(256, 512, device=DEVICE, dtype=HALF)
    return Workload(
        "compiled_function",
        model,
        [((x,), {})],
        model,
        "a torch.compile'd function (linear + tanh-GELU, inductor) called from an eager module's forward, fp16",
        compiled=True,
    )


class TwoThreads(nn.Module):
    """forward launches kernels from the calling thread and from a second Python thread."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(1024, 1024)

    def forward(self, x):
        side = torch.zeros_like(x)

        def work():
            for _ in range(20):
                side.mul_(1.0001).add_(1)

        thread = threading.Thread(target=work)
        thread.start()
        y = F.relu(self.linear(x))
        thread.join()
        return y + side


def threads() -> Workload:
    model = TwoThreads().to(DEVICE, HALF).eval()
    x = torch.randn(256, 1024, device=DEVICE, dtype=HALF)
    return Workload(
        "threads",
        model,
        [((x,), {})],
        model,
        "Linear+ReLU on the main thread, mul_/add_ x20 on a second Python thread, fp16",
    )


ALL = [
    resnet50,
    bert,
    gpt2,
    vit,
    transformer_encoder,
    unet_block,
    mlp,
    demo,
    cuda_graph,
    compiled,
    threads,
    compiled_graphs,
    compiled_function,
    *MODELS,
    *COMPILE_FORMS,
]
