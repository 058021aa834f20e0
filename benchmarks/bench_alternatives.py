"""torch.compile'd versions of the calls that bench_check.py benches, for ``kernelscope bench --against``:

    cd benchmarks && kernelscope bench RUN --function linear --against compiled=bench_alternatives:compiled_linear

Each is compiled with ``dynamic=False``, so every distinct sample gets a graph specialized to its shapes, as a
kernel written for that shape would be. KERNELSCOPE_COMPILE_BACKEND (default ``inductor``) and
KERNELSCOPE_COMPILE_MODE (default: torch's default mode) choose how.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F  # noqa: N812

# One graph per distinct sample: dynamo's recompilation limits (8 by default) must not cut a call's samples off.
for _limit in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
    if hasattr(torch._dynamo.config, _limit):
        setattr(torch._dynamo.config, _limit, 256)


def compiled(function, backend: str | None = None, mode: str | None = None):
    """``function`` compiled for static shapes; ``mode`` only for inductor, the one backend that takes it."""
    backend = backend or os.environ.get("KERNELSCOPE_COMPILE_BACKEND", "inductor")
    mode = mode or os.environ.get("KERNELSCOPE_COMPILE_MODE") or None
    return torch.compile(function, dynamic=False, backend=backend, mode=mode if backend == "inductor" else None)


def _linear(input, weight, bias=None):
    return F.linear(input, weight, bias)


def _scaled_dot_product_attention(*args, **kwargs):
    return F.scaled_dot_product_attention(*args, **kwargs)


compiled_linear = compiled(_linear)
compiled_sdpa = compiled(_scaled_dot_product_attention)
