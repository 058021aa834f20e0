"""One transformer block with its own forward, torch.compile'd in each way users compile (inductor), for the GPU
check: the module compiled whole with two input shapes (two compiled entries), ``dynamic=True``,
``model.forward = torch.compile(model.forward)``, ``model.compile(mode="reduce-overhead")`` (CUDA graphs),
``mode="max-autotune-no-cudagraphs"``, and graph breaks at ``Tensor.item`` and a data-dependent branch. The child
module and the compiled function are workloads.py's ``compiled``, ``compiled_graphs`` and ``compiled_function``."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from workload import DEVICE, HALF, Workload, needs_cuda, on_gpu

WIDTH, HEADS = on_gpu(512, 64), 8
LENGTHS = on_gpu((128, 64), (16, 8))


class Block(nn.Module):
    """A pre-norm transformer block: self-attention (sdpa) and a GELU MLP, with residuals."""

    def __init__(self, graph_breaks: bool = False):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.fc1, self.fc2 = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)
        self.graph_breaks = graph_breaks

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d))
        if self.graph_breaks:
            if x.abs().amax() > 1e4:  # data-dependent: compiled code calls Tensor.__bool__ eagerly
                x = x.clamp(-1e4, 1e4)
            x = x * (1.0 + 0.0 * x.mean().item())  # Tensor.item: a graph break
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def _samples(lengths=LENGTHS) -> list:
    return [((torch.randn(8, n, WIDTH, device=DEVICE, dtype=HALF),), {}) for n in lengths]


def _block(graph_breaks: bool = False) -> Block:
    return Block(graph_breaks).to(DEVICE, HALF).eval()


def _workload(name: str, model: nn.Module, description: str, samples: list | None = None) -> Workload:
    samples = _samples() if samples is None else samples
    shapes = ", ".join(str(tuple(args[0].shape)) for args, _ in samples)
    description = f"{description}; block d {WIDTH}, inputs {shapes}, fp16"
    return Workload(name, model, samples, model, description, compiled=True)


def compiled_root_two_shapes() -> Workload:
    return _workload("compiled_root_two_shapes", torch.compile(_block()), "torch.compile(block): two compiled entries")


def compiled_dynamic() -> Workload:
    return _workload("compiled_dynamic", torch.compile(_block(), dynamic=True), "torch.compile(block, dynamic=True)")


def compiled_forward_attribute() -> Workload:
    model = _block()
    model.forward = torch.compile(model.forward)
    return _workload("compiled_forward_attribute", model, "model.forward = torch.compile(model.forward)")


@needs_cuda
def compiled_reduce_overhead() -> Workload:
    model = _block()
    model.compile(mode="reduce-overhead")
    return _workload(
        "compiled_reduce_overhead", model, "model.compile(mode='reduce-overhead'): CUDA graphs", _samples(LENGTHS[:1])
    )


@needs_cuda
def compiled_max_autotune() -> Workload:
    model = torch.compile(_block(), mode="max-autotune-no-cudagraphs")
    return _workload(
        "compiled_max_autotune", model, "torch.compile(block, mode='max-autotune-no-cudagraphs')", _samples(LENGTHS[:1])
    )


def compiled_graph_breaks() -> Workload:
    return _workload(
        "compiled_graph_breaks",
        torch.compile(_block(graph_breaks=True)),
        "torch.compile(block) with graph breaks at a data-dependent branch and Tensor.item",
    )


COMPILE_FORMS = [
    compiled_root_two_shapes,
    compiled_dynamic,
    compiled_forward_attribute,
    compiled_reduce_overhead,
    compiled_max_autotune,
    compiled_graph_breaks,
]
