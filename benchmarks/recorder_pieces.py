"""The recorder's per-call pieces timed alone, on this machine's CPU and CUDA tensors, under an active
torch.profiler (CPU+CUDA where there is CUDA): tensor metadata reads, a call's sample key, a scope, a
wrapped functional against the bare one, and the path of a new signature with its retention bookkeeping
(taken for every distinct input by the keyed warm-up pass and after the recorded pass, or inside the
recorded pass when it is keyed per call). Then cProfile of recorded passes of the given workloads, each
made as profile() makes it (recorder.profiler.record_pass: keyed warm-up, predicted pass), the profile
taken of the predicted pass alone.

Usage: python benchmarks/recorder_pieces.py [workload factory ...]   (e.g. vit bert)

Prints one line per piece and device (ns per call), then the last 6000 characters of each workload's cProfile
(cumulative). Its output is kept as benchmarks/results/recorder_pieces_<machine>_<date>.txt.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
import timeit
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
from kernelscope.recorder import interpreter_state  # noqa: E402
from kernelscope.recorder.instrument import instrumented  # noqa: E402
from kernelscope.recorder.profiler import hold_limit_bytes, profiler_options, record_pass  # noqa: E402
from kernelscope.recorder.retention import CappedSampleBook  # noqa: E402
from kernelscope.recorder.sample_keys import call_key  # noqa: E402

N = 2000


def per_call_ns(stmt: str, names: dict) -> float:
    return min(timeit.repeat(stmt, globals=names, number=N, repeat=3)) / N * 1e9


def pieces(device: str) -> None:
    dtype = torch.float16 if device == "cuda" else torch.float32
    x = torch.randn(8, 16, 64, device=device, dtype=dtype)
    linear = torch.nn.Linear(64, 64).to(device, dtype)
    book = CappedSampleBook(None)
    record = book.recorder("linear")
    names = {
        "x": x,
        "w": linear.weight,
        "b": linear.bias,
        "F": F,
        "call_key": call_key,
        "p": book.persistent,
        "record": record,
        "Scope": torch._C._profiler._RecordFunctionFast,
        "slices": (slice(None), 0),
    }
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.no_grad(), profile(activities=activities, **profiler_options()):
        book.remember([*linear.parameters()])
        statements = [
            "x.shape",
            "x.stride()",
            "x.dtype",
            "x.device",
            "x.layout",
            "(x.shape, x.dtype, x.stride(), x.device)",
            "call_key((x, w, b), {}, p)",
            "call_key((x, 0.0, False, False), {}, p)",
            "call_key((x, slices), {}, p)",
            "record((x, w, b), {})",
            "with Scope('ks.fn:linear#0'): pass",
        ]
        if device == "cuda":
            statements.append("F.linear(x, w, b)")
        for stmt in statements:
            print(f"{device:5s} {stmt:45s} {per_call_ns(stmt, names):8.0f} ns", flush=True)
        if device == "cuda":
            names["linear"] = linear
            with instrumented([("", linear)], CappedSampleBook(None), None, "all"):
                for stmt in ("F.linear(x, w, b)", "linear(x)"):
                    print(f"{device:5s} {stmt + ' recorded':45s} {per_call_ns(stmt, names):8.0f} ns", flush=True)
            torch.cuda.synchronize()


def new_signatures(device: str, count: int = 500) -> None:
    """The per-signature path: each call has a new signature (a tensor of a new shape, fresh from the
    allocator, as a recording's first inputs are), with the GC paused as in a recording."""
    from kernelscope.recorder.retention import _storage
    from kernelscope.recorder.samples import SampleBook

    def fresh(n: int) -> list:
        return [torch.randn(4, 8 + i, device=device) for i in range(n)]

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.no_grad(), profile(activities=activities, **profiler_options()), interpreter_state.gc_paused():
        for label, make_book in (("SampleBook", SampleBook), ("CappedSampleBook", lambda: CappedSampleBook(2**40))):
            record = make_book().recorder("relu")
            tensors = fresh(count)
            start = time.perf_counter()
            for tensor in tensors:
                record((tensor, False), {})
            print(f"{device:5s} {'new signature, ' + label:45s} {(time.perf_counter() - start) / count * 1e9:8.0f} ns")
        for label, piece in (
            ("untyped_storage() of a fresh tensor", lambda t: t.untyped_storage()),
            ("_storage() of a fresh tensor", _storage),
            ("device of a fresh tensor", lambda t: t.device),
        ):
            tensors = fresh(count)
            start = time.perf_counter()
            for tensor in tensors:
                piece(tensor)
            print(f"{device:5s} {label:45s} {(time.perf_counter() - start) / count * 1e9:8.0f} ns", flush=True)
        if device == "cuda":
            torch.cuda.synchronize()


def profile_pass(name: str) -> None:
    import workloads

    w = {factory.__name__: factory for factory in workloads.ALL}[name]()
    modules = list(w.module.named_modules())

    one_pass = w.one_pass

    with torch.no_grad():
        for _ in range(3):
            one_pass()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **profiler_options()):
            book = CappedSampleBook(2**30)
            with instrumented(modules, book, None, "all"):
                profiler = cProfile.Profile()

                def profiled_pass():
                    profiler.enable()
                    one_pass()
                    profiler.disable()

                for _ in range(5):
                    _, keys, _ = record_pass(
                        book, one_pass, profiled_pass, hold_limit_bytes("cuda", book), rehearsal=one_pass
                    )
                    assert keys == "predicted", keys
            torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
    print(f"== cProfile of 5 predicted passes: {name}\n" + out.getvalue()[-6000:])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD", help="factories of benchmarks/workloads.py (CUDA)")
    sys.argv[1:] = parser.parse_args().workloads
    pieces("cpu")
    new_signatures("cpu")
    if torch.cuda.is_available():
        pieces("cuda")
        new_signatures("cuda")
        for name in sys.argv[1:]:
            profile_pass(name)
