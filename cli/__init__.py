"""kernelscope: which torch.nn.functional call, inside which module, launched every GPU kernel.

``import kernelscope`` loads neither torch nor DuckDB: names resolve lazily (PEP 562) from
``kernelscope.recorder`` (needs torch) or ``kernelscope.analyzer`` (torch-free).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "ModuleFunctionKernelProfiler": "kernelscope.recorder",
    "load_run": "kernelscope.analyzer",
    "describe_results": "kernelscope.analyzer",
    "Run": "kernelscope.analyzer",
    "TensorMeta": "kernelscope.analyzer",
    "KernelscopeError": "kernelscope.analyzer",
    "BadInputError": "kernelscope.analyzer",
    "diff": "kernelscope.analyzer",
    "archive_runs": "kernelscope.analyzer",
    "open_archive": "kernelscope.analyzer",
    "bench": "kernelscope.recorder.bench",
    "bench_savings": "kernelscope.recorder.bench",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kernelscope' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
