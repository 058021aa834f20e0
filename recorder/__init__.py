"""kernelscope.recorder: instrument a model for one recording and write a run directory (needs torch)."""

from .profiler import DEFAULT_SAMPLE_MEMORY_LIMIT_MB, DEFAULT_SAMPLE_TENSOR_LIMIT_MB, ModuleFunctionKernelProfiler

__all__ = ["DEFAULT_SAMPLE_MEMORY_LIMIT_MB", "DEFAULT_SAMPLE_TENSOR_LIMIT_MB", "ModuleFunctionKernelProfiler"]
