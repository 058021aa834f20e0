"""The workloads of profile_vs_aitune.py: where profile()'s fixed cost shows (small models) and the GPU check's
models that build without downloads. Most come from workloads.py and workloads_models.py; two are defined here."""

from __future__ import annotations

from collections.abc import Callable

import torch
import workloads
import workloads_models
from torch import nn
from workload import BF16, DEVICE, Workload


def tiny() -> Workload:
    """Four modules (a Sequential of Linear, ReLU, Linear): a recording that is nearly all fixed cost."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64)).to(DEVICE).eval()
    x = torch.randn(8, 64, device=DEVICE)
    return Workload("tiny", model, [((x,), {})], model, "Sequential(Linear(64, 64), ReLU, Linear(64, 64)), batch 8")


def convnext_t() -> Workload:
    import torchvision

    model = torchvision.models.convnext_tiny().to(DEVICE, BF16).eval()
    x = torch.randn(8, 3, 224, 224, device=DEVICE, dtype=BF16)
    return Workload("convnext_t", model, [((x,), {})], model, "torchvision convnext_tiny, batch 8, bf16, 224x224", 0)


def for_device(device: str) -> dict[str, Callable[[], Workload]]:
    """Name -> factory, in the order they run: a few small models on the CPU, the GPU check's set on CUDA."""
    if device == "cpu":
        factories = [tiny, workloads.demo, workloads_models.fast_path_encoder]
    else:
        factories = [
            tiny,
            workloads.mlp,
            workloads_models.fast_path_encoder,
            workloads.transformer_encoder,  # enable_nested_tensor=False, batch_first=False: the slow path
            workloads.vit,
            convnext_t,
            workloads_models.mixtral,
            workloads_models.t5_generate,
            workloads_models.compiled_cnn,
        ]
    return {factory.__name__: factory for factory in factories}
