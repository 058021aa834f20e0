"""Plain traces against recordings: does a bare torch.profiler(with_stack=True) trace, attributed from its Python
frames (analyzer/frames.sql), name each kernel's call and module as a kernelscope recording of the same workload does?

Per workload of benchmarks/workloads.py: a kernelscope recording (profile(), 3 warm-up passes), then a bare
torch.profiler trace with with_stack=True of one more pass. Where both passes ran the same device events in the same
order their rows are paired, and the device time of the pairs is split into: the same call; no call from the frames
(an operator reached through a Python operator, x + y, makes no frame); another call (listed). The modules: how many
recorded modules, how many chains of module frames, and whether each chain is one recorded module.

    python benchmarks/frames_vs_recording.py OUT.json [workload ...]   # on a CUDA machine: the workloads
    python benchmarks/frames_vs_recording.py OUT.json --cpu            # here: the demo model, its CPU operators
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
import workloads  # noqa: E402
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402


def plain_trace(w: workloads.Workload, path: Path) -> None:
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with torch.no_grad(), profile(activities=activities, with_stack=True) as profiler:
        w.one_pass()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    profiler.export_chrome_trace(str(path))


def compare(w: workloads.Workload) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        recorder = ModuleFunctionKernelProfiler()
        recorded, _ = recorder.profile(w.fn, w.samples, module=w.module, warmup_iterations=3)
        recorded = recorded.drop(columns="module", errors="ignore")
        recorder.release()
        plain_trace(w, Path(scratch) / "plain.json")
        with load_run(Path(scratch) / "plain.json") as run:
            plain = run.profiling_df()
    result = {"rows_recorded": len(recorded), "rows_plain": len(plain)}
    if list(recorded["kernel"]) != list(plain["kernel"]):
        result["paired"] = False  # the passes ran other kernels (autotuning, a cache): nothing to pair
        return result
    total = float(recorded["kernel_us"].sum())
    same = unnamed = 0.0
    other: Counter = Counter()
    no_frame: set = set()
    for theirs, mine, us in zip(recorded["function_name"], plain["function_name"], recorded["kernel_us"], strict=True):
        if mine == theirs:
            same += us
        elif mine is None:
            unnamed += us
            no_frame.add(theirs or "-")
        else:
            other[(theirs, mine)] += us
    modules = set(zip(recorded["module_name"].fillna("-"), plain["module_name"].fillna("-"), strict=True))
    result.update(
        paired=True,
        same_call_pct=100 * same / total if total else 100.0,
        no_frame_call_pct=100 * unnamed / total if total else 0.0,
        other_call_pct=100 * sum(other.values()) / total if total else 0.0,
        other_calls=[
            {"recorded": theirs, "plain": mine, "us": round(us, 3)} for (theirs, mine), us in other.most_common()
        ],
        no_frame_calls=sorted(no_frame),
        recorded_modules=len({m for m, _ in modules}),
        frame_chains=len({c for _, c in modules}),
        each_chain_one_module=len({c for _, c in modules}) == len(modules),
    )
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, metavar="OUT.json", help="where the results go")
    parser.add_argument(
        "workloads", nargs="*", default=[], metavar="WORKLOAD", help="workloads.py names (default: all)"
    )
    parser.add_argument("--cpu", action="store_true", help="the demo model on the CPU instead of the workloads")
    args = parser.parse_args(argv)
    out, wanted = args.out, set(args.workloads)
    if args.cpu:
        from kernelscope.demo import demo_workload

        model, samples = demo_workload("cpu", torch.float32)
        factories = [lambda: workloads.Workload("demo (cpu)", model, samples, model, "the demo model on the CPU")]
    else:
        factories = [f for f in workloads.ALL if not wanted or f.__name__ in wanted]
    results = {}
    for factory in factories:
        try:
            w = factory()
            results[w.name] = compare(w)
        except Exception:  # one broken workload must not hide the others' results
            results[getattr(factory, "__name__", "?")] = {"error": traceback.format_exc()}
    out.write_text(json.dumps({"torch": torch.__version__, "results": results}, indent=1))
    for name, r in results.items():
        if "error" in r or not r.get("paired"):
            print(
                f"{name:20s} {'error' if 'error' in r else 'not paired'} {r.get('rows_recorded')} {r.get('rows_plain')}"
            )
        else:
            print(
                f"{name:20s} rows {r['rows_recorded']:5d}  same call {r['same_call_pct']:6.2f}%  "
                f"no frame {r['no_frame_call_pct']:6.2f}%  other {r['other_call_pct']:6.2f}%  "
                f"modules {r['recorded_modules']} chains {r['frame_chains']} one each {r['each_chain_one_module']}"
            )


if __name__ == "__main__":
    main()
