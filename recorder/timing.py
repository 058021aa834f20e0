"""Timing one call: CUDA events on the GPU, ``torch.utils.benchmark.Timer`` on the CPU; per-call times of
``repeat`` measurements after ``warmup`` calls, summarized as min / median / max.

On the GPU each timed call starts with a cold L2 (``flush_l2``): a buffer larger than the L2 is written before
it, outside the events, as Triton's ``do_bench`` does, so a call is not timed on operands the previous repeat
left in the cache. That flush, and a ``torch.cuda._sleep`` as long as the call takes to launch, also keep the
GPU busy while the call is launched, so the events time the call's device work, not the host's launch gaps:
the recorded times a replay is compared with are kernel durations. On the CPU the caches are left as they
are: a cache flush would also evict the code and the Python state a CPU call runs through, which the recorded
pass had warm.

Only torch and the standard library are used here: ``kernelscope bench --scripts`` copies this module's
source into the standalone scripts it writes.
"""

import math
import statistics
import time

import torch

L2_FLUSH_MIN_BYTES = 256 * 2**20
CPU_BLOCK_S = 50e-6  # a CPU measurement times calls in blocks of at least this long, so the timer's own cost is small
_flush_buffers = {}
_sleep_cycles_per_us = {}


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
    with torch.cuda.device(device):
        torch.cuda.synchronize()
        launch_s = []
        for _ in range(max(warmup, 1)):
            start = time.perf_counter()
            call()
            launch_s.append(time.perf_counter() - start)
        torch.cuda.synchronize()
        flush = _flush_buffer(device) if flush_l2 else None
        ahead = _sleep_cycles(device, 1.5 * statistics.median(launch_s) * 1e6)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
        for start, end in zip(starts, ends, strict=True):
            if flush is not None:
                flush.zero_()
            if ahead:
                torch.cuda._sleep(ahead)
            start.record()
            call()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) * 1e3 for start, end in zip(starts, ends, strict=True)]


def _flush_buffer(device):
    """A byte buffer of twice the L2 (at least 256 MiB), made once per device."""
    key = str(device)
    if key not in _flush_buffers:
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0
        _flush_buffers[key] = torch.empty(max(2 * l2, L2_FLUSH_MIN_BYTES), dtype=torch.int8, device=device)
    return _flush_buffers[key]


def _sleep_cycles(device, microseconds):
    """GPU clock cycles of ``torch.cuda._sleep`` that last about ``microseconds`` (0 where torch has no such
    kernel); its rate is measured once per device."""
    if not hasattr(torch.cuda, "_sleep") or microseconds <= 0:
        return 0
    key = str(device)
    if key not in _sleep_cycles_per_us:
        cycles = 1_000_000
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)  # the first launch loads the kernel
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _sleep_cycles_per_us[key] = cycles / max(start.elapsed_time(end) * 1e3, 1e-3)
    return int(microseconds * _sleep_cycles_per_us[key])


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
