"""kernelscope's whole profile() against aitune 0.6.0's and against a plain torch.profiler pass, in one process.

Per workload and round, in an order that rotates each round, three ways of profiling the same model:
  kernelscope  ModuleFunctionKernelProfiler().profile(fn, samples, module=..., warmup_iterations=W), temporary run,
               then release(): recording, writing the run directory, loading it, the in-process frames
  aitune       aitune 0.6.0's ModuleFunctionKernelProfiler().profile(fn, samples, module=..., warmup_iterations=W)
               (needs CUDA; imported from its wheel, see below)
  plain        the same W warm-up passes, one torch.profiler pass (CPU, and CUDA on a GPU) and export_chrome_trace
               to a temporary file: the floor of any recorder that writes Kineto's trace
Each is timed wall-clock with perf_counter (the GPU synchronized before and after). The first call of each way in the
process (torch.profiler's own imports, inductor's for a compiled model) is timed on its own and reported apart, on
the first workload; the rounds that follow are the measurement, median kept.

aitune is not installed: its profiler module is imported from the wheel (--aitune-wheel, else $AITUNE_WHEEL, else
aitune-0.6.0-py3-none-any.whl in /work/wt/aitune-wheel/ or the repository's .whl/), unpacked to a temporary
directory, with stub modules for the package __init__s (which import all of aitune), its distributed coordinator
(one process: no checks to make) and its config (which imports nvtx). It needs wrapt, tabulate and torch; where wrapt or
tabulate is missing, or there is no CUDA, aitune is reported unavailable with the reason.

    python benchmarks/profile_vs_aitune.py --device cpu --rounds 2
    python benchmarks/profile_vs_aitune.py --device cuda --rounds 5 --out profile_vs_aitune_h200.json

Prints, per workload, the median seconds of each way and the ratios kernelscope/aitune and kernelscope/plain
(below 1: kernelscope is faster), then the first calls; --out writes every timing, the medians and the versions
as JSON. Workloads: --workloads a,b (default: the device's set: small ones on the CPU; on CUDA the models of the
GPU check built without downloads: ViT-B/16 (timm, pretrained=False), nn.TransformerEncoder's fast and slow paths,
ConvNeXt-T (torchvision), a small MoE (Mixtral from config), T5 generate() from config, a compiled CNN).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import types
import zipfile
from pathlib import Path

HERE = Path(__file__).parent
WHEEL = "aitune-0.6.0-py3-none-any.whl"
WHEEL_PLACES = (Path("/work/wt/aitune-wheel"), HERE.parent / ".whl")  # the first that holds it is the default
METHODS = ("kernelscope", "aitune", "plain")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3, help="warm-up passes of each profile (warmup_iterations)")
    parser.add_argument("--workloads", default=None, help="comma-separated names (default: the device's set)")
    found = next(
        (str(place / WHEEL) for place in WHEEL_PLACES if (place / WHEEL).is_file()), str(WHEEL_PLACES[0] / WHEEL)
    )
    parser.add_argument("--aitune-wheel", default=os.environ.get("AITUNE_WHEEL", found))
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before torch: benchmarks/workload.py picks the device from it
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: torch sees no CUDA device")
    sys.path.insert(0, str(HERE))
    import workloads_small

    aitune_profiler, aitune_problem = load_aitune(args.aitune_wheel, args.device)
    factories = workloads_small.for_device(args.device)
    names = args.workloads.split(",") if args.workloads else list(factories)
    built, skipped = {}, {}
    for name in names:
        try:
            built[name] = factories[name]()
        except KeyError:
            sys.exit(f"no workload {name!r}; known: {', '.join(factories)}")
        except ImportError as exc:  # timm, transformers or torchvision missing
            skipped[name] = f"not built: {exc}"
    ways = {"kernelscope": kernelscope_way, "plain": plain_way}
    if aitune_profiler is not None:
        ways["aitune"] = aitune_way(aitune_profiler)
    print(f"device {args.device}, torch {torch.__version__}, rounds {args.rounds}, warm-up passes {args.warmup}")
    print(f"aitune: {'loaded from ' + args.aitune_wheel if aitune_profiler else 'unavailable: ' + aitune_problem}")
    for name, why in skipped.items():
        print(f"{name}: {why}")

    first = {}
    if built:
        name, w = next(iter(built.items()))
        for way, run in ways.items():
            first[way] = timed(run, w, args.warmup)
    times: dict[str, dict[str, list[float]]] = {name: {way: [] for way in ways} for name in built}
    for name, w in built.items():  # each way once more per workload before the rounds: its own first-call costs
        for run in ways.values():
            timed(run, w, args.warmup)
    order = list(ways)
    for round_index in range(args.rounds):
        rotated = order[round_index % len(order) :] + order[: round_index % len(order)]
        for name, w in built.items():
            for way in rotated:
                times[name][way].append(timed(ways[way], w, args.warmup))
    results = report(times, first, built)
    if args.out:
        payload = {
            "device": args.device,
            "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpus": os.cpu_count(),
            "rounds": args.rounds,
            "warmup_iterations": args.warmup,
            "aitune": None if aitune_profiler is None else "0.6.0",
            "aitune_unavailable": aitune_problem,
            "skipped": skipped,
            "first_calls_s": first,
            "workloads": results,
        }
        Path(args.out).write_text(json.dumps(payload, indent=2))
        print(f"wrote {args.out}")


def timed(run, w, warmup: int) -> float:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    run(w, warmup)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def kernelscope_way(w, warmup: int) -> None:
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    profiler = ModuleFunctionKernelProfiler()
    profiler.profile(w.fn, w.samples, module=w.module, warmup_iterations=warmup)
    profiler.release()


def aitune_way(profiler_class):
    def run(w, warmup: int) -> None:
        profiler_class().profile(w.fn, w.samples, module=w.module, warmup_iterations=warmup)

    return run


def plain_way(w, warmup: int) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with torch.no_grad():
        for _ in range(warmup):
            w.one_pass()
        with profile(activities=activities) as prof:
            w.one_pass()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
    with tempfile.TemporaryDirectory(prefix="plain-") as scratch:
        prof.export_chrome_trace(os.path.join(scratch, "trace.json"))


def report(times: dict, first: dict, built: dict) -> dict:
    results = {}
    header = f"{'workload':<22}{'kernelscope s':>14}{'aitune s':>10}{'plain s':>10}{'ks/aitune':>11}{'ks/plain':>10}"
    print(header)
    for name, by_way in times.items():
        medians = {way: statistics.median(values) for way, values in by_way.items() if values}
        ks = medians["kernelscope"]
        ratios = {f"kernelscope/{way}": ks / value for way, value in medians.items() if way != "kernelscope"}
        results[name] = {"description": built[name].description, "times_s": by_way, "median_s": medians, **ratios}
        aitune = f"{medians['aitune']:>10.3f}" if "aitune" in medians else f"{'—':>10}"
        vs_aitune = f"{ratios['kernelscope/aitune']:>10.2f}x" if "aitune" in medians else f"{'—':>11}"
        print(f"{name:<22}{ks:>14.3f}{aitune}{medians['plain']:>10.3f}{vs_aitune}{ratios['kernelscope/plain']:>9.1f}x")
    if first:
        calls = ", ".join(f"{way} {seconds:.2f} s" for way, seconds in first.items())
        print(f"first call of each way in the process, in this order ({next(iter(built))}): {calls}")
    return results


def load_aitune(wheel: str, device: str):
    """aitune's ModuleFunctionKernelProfiler class from its wheel, or (None, why not)."""
    if device != "cuda":
        return None, "aitune's profiler requires CUDA (it raises RuntimeError without it)"
    if not Path(wheel).is_file():
        return None, f"no wheel at {wheel} (--aitune-wheel)"
    try:
        import wrapt  # noqa: F401
    except ImportError:
        return None, "its profiler needs wrapt, which is not installed (pip install wrapt)"
    root = Path(tempfile.mkdtemp(prefix="aitune-wheel-"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(root)
    package = root / "aitune"

    def stub(name: str, path: Path | None = None, **attributes) -> types.ModuleType:
        module = types.ModuleType(name)
        if path is not None:
            module.__path__ = [str(path)]  # a package whose submodules load from the wheel, its __init__ not run
        module.__dict__.update(attributes)
        sys.modules[name] = module
        return module

    class Coordinator:  # one process: every rank agrees, and a failure is the local one
        def verify_equal(self, value, description):
            return None

        def raise_if_any_rank_fails(self, description):
            return contextlib.nullcontext()

    stub("aitune", package)
    stub("aitune.torch", package / "torch")
    stub("aitune.torch.kernel_forge", package / "torch" / "kernel_forge")
    stub("aitune.torch.module", package / "torch" / "module")
    stub("aitune.torch.distributed", coordinator=Coordinator())
    stub("aitune.torch.config", config=types.SimpleNamespace(enable_transformers_integration=True))
    try:
        import tabulate  # noqa: F401
    except ImportError:
        stub("tabulate", tabulate=lambda *args, **kwargs: "")  # printing only, never on the profiler's path
    try:
        from aitune.torch.kernel_forge.module_function_kernel_profiler import ModuleFunctionKernelProfiler
    except ImportError as exc:
        return None, f"its profiler did not import: {exc}"
    return ModuleFunctionKernelProfiler, None


if __name__ == "__main__":
    main()
