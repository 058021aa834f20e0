"""A helper module of a sweep program's model code (benchmarks/sweep_cpu_mechanisms_unseen11_more.py imports it):
its function stores the activation it uses in its own globals at every call, as a library's cached lookup does."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812

ACT = None  # written at each call: while recorded, whatever F.gelu is then
TABLE: dict = {}


def cached_gelu(x: torch.Tensor) -> torch.Tensor:
    global ACT
    ACT = F.gelu
    TABLE[F.relu] = F.silu
    return TABLE[F.relu](ACT(x))
