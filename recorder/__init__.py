"""kernelscope.recorder: instrument a model for one recording and write a run directory (needs torch)."""

try:
    import torch  # noqa: F401 (the recorder's one requirement, checked first to say how to get it)
except ModuleNotFoundError as exc:
    if exc.name != "torch":
        raise
    raise ModuleNotFoundError(
        "kernelscope's recorder (ModuleFunctionKernelProfiler, kernelscope demo/record) needs torch, which is "
        "not installed: pip install 'kernelscope[record]' (without CUDA, install the CPU build of torch first: "
        "pip install torch --index-url https://download.pytorch.org/whl/cpu); the analyzer works without it",
        name="torch",
    ) from None

from .profiler import DEFAULT_SAMPLE_MEMORY_LIMIT_MB, DEFAULT_SAMPLE_TENSOR_LIMIT_MB, ModuleFunctionKernelProfiler

__all__ = ["DEFAULT_SAMPLE_MEMORY_LIMIT_MB", "DEFAULT_SAMPLE_TENSOR_LIMIT_MB", "ModuleFunctionKernelProfiler"]
