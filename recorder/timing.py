"""Timing one call: on the GPU the durations of its kernels, from a profiler trace as the recording took them;
``torch.utils.benchmark.Timer`` on the CPU. Per-call times of ``repeat`` measurements after ``warmup`` calls,
summarized as min / median / max.

On the GPU each timed call runs inside a ``record_function`` of its own under ``torch.profiler``, and its time is
the sum of the device events (kernels, memcpy, memset) launched inside it: the same quantity as the recorded
``kernel_us`` it is compared with, without the launch and event overheads (a few µs) that CUDA events around a
call of µs-long kernels count. Each timed call starts with a cold L2 (``flush_l2``): a buffer larger than the L2
is written before it, outside its ``record_function``, as Triton's ``do_bench`` does, so a call is not timed on
operands the previous repeat left in the cache. On the CPU the caches are left as they are: a cache flush would
also evict the code and the Python state a CPU call runs through, which the recorded pass had warm.

Only torch and the standard library are used here: ``kernelscope bench --scripts`` copies this module's
source into the standalone scripts it writes.
"""

import math
import statistics

import torch

L2_FLUSH_MIN_BYTES = 256 * 2**20
CPU_BLOCK_S = 50e-6  # a CPU measurement times calls in blocks of at least this long, so the timer's own cost is small
TIMED_CALL = "kernelscope.bench.call#"  # the record_function around each timed call
_flush_buffers = {}


def time_call(call, device, repeat, warmup, flush_l2=True):
    """``(min_us, median_us, max_us)`` per call of ``call()`` on ``device`` (a ``torch.device``)."""
    if repeat < 1 or warmup < 0:
        raise ValueError("repeat must be >= 1 and warmup >= 0")
    times = (
        _cuda_times(call, device, repeat, warmup, flush_l2)
        if device.type == "cuda"
        else _cpu_times(call, repeat, warmup)
    )
    return min(times), statistics.median(times), max(times)


def _cuda_times(call, device, repeat, warmup, flush_l2):
    from torch.profiler import ProfilerActivity, profile, record_function

    with torch.cuda.device(device):
        for _ in range(max(warmup, 1)):
            call()
        torch.cuda.synchronize()
        flush = _flush_buffer(device) if flush_l2 else None
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for index in range(repeat):
                if flush is not None:
                    flush.zero_()
                with record_function(f"{TIMED_CALL}{index}"):
                    call()
            torch.cuda.synchronize()
    times = {}
    for event in prof.events():
        if event.name.startswith(TIMED_CALL):
            times[int(event.name[len(TIMED_CALL) :])] = event.device_time_total
    if len(times) != repeat:
        raise RuntimeError(f"the profiler kept {len(times)} of the {repeat} timed calls")
    return [times[index] for index in range(repeat)]


def _flush_buffer(device):
    """A byte buffer of twice the L2 (at least 256 MiB), made once per device."""
    key = str(device)
    if key not in _flush_buffers:
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0
        _flush_buffers[key] = torch.empty(max(2 * l2, L2_FLUSH_MIN_BYTES), dtype=torch.int8, device=device)
    return _flush_buffers[key]


def release_buffers():
    """Let the L2 flush buffers go (they stay allocated between calls of one benchmark)."""
    _flush_buffers.clear()


def _cpu_times(call, repeat, warmup):
    from torch.utils.benchmark import Timer

    for _ in range(warmup):
        call()
    timer = Timer("call()", globals={"call": call}, num_threads=torch.get_num_threads())
    once = timer.timeit(1).median
    number = max(1, min(10_000, math.ceil(CPU_BLOCK_S / max(once, 1e-9))))
    return [timer.timeit(number).median * 1e6 for _ in range(repeat)]
