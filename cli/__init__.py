"""kernelscope: which torch.nn.functional call, inside which module, launched every GPU kernel.

Record (needs torch):

``ModuleFunctionKernelProfiler`` (function_names=None): .profile(model, samples, warmup_iterations=3, out=None)
    returns (profiling_df, function_data); .describe_results(profiling_df, function_data, top_k=10).
``bench`` (run, ["linear"], against={...}): replay recorded calls, time and check alternatives.
``bench_savings`` (frame): what each alternative of bench() saves over the pass.

Analyze anywhere (no torch):

``load_run`` (path): a run directory, job or Kineto trace as a Run (use it in a with block).
``Run``: .describe(top_k=10, rank=None), .profiling_df(), .function_data(), .sql(query), .time_by(column),
    .tree() (each module's time, its submodules' included), .describe_by_rank(), .time_by_rank(column).
``describe_results`` (profiling_df, function_data, top_k=10): the per-function summary of any profiling_df.
``diff`` (a, b): run b against run a, per function, module and kernel.
``archive_runs`` ([run, ...], to): add runs to an archive of Parquet files.
``Archive`` (path), ``open_archive`` (path): an archive: .runs(), .sql(query), .run(id).
``TensorMeta``: what function_data holds in place of a tensor offline (shape, dtype, strides, device).
``KernelscopeError``, ``BadInputError``: bad input, with one sentence naming the file.

``import kernelscope`` loads neither torch nor DuckDB: names resolve lazily (PEP 562) from
kernelscope.recorder or kernelscope.analyzer. README.md and docs/ say more.
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
    "Archive": "kernelscope.analyzer",
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
