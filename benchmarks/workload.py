"""What a workload of the benchmarks is (workloads.py lists them), and the device it runs on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from kernelscope.recorder.profiler import _run_pass
from torch import nn

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HALF = torch.float16 if DEVICE == "cuda" else torch.float32
BF16 = torch.bfloat16 if DEVICE == "cuda" else torch.float32


def on_gpu(gpu: Any, cpu: Any) -> Any:
    """``gpu`` on a CUDA machine, else ``cpu``: a size that keeps the CPU trial of the GPU check short."""
    return gpu if DEVICE == "cuda" else cpu


def needs_cuda(factory: Any) -> Any:
    """Mark a workload factory that runs only on a CUDA machine (CUDA graphs, autotuning of GPU kernels)."""
    factory.needs_cuda = True
    return factory


@dataclass
class Workload:
    name: str
    fn: Any
    samples: list | None
    module: nn.Module
    description: str
    sample_tensor_limit_mb: float = 4.0
    notes: dict = field(default_factory=dict)
    compiled: bool = False  # torch.compile'd code: the GPU check also records it with 0 and 1 warm-ups

    def one_pass(self, fn: Any = None) -> None:
        """One pass over ``samples`` as profile() runs it, calling ``fn`` (default: the workload's)."""
        _run_pass(fn or self.fn, self.samples)
