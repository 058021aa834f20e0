"""profile() on many models and mechanisms on the CPU, with the checks a user would make of any model:

  1. profile() does not raise;
  2. the recorded pass's outputs are bit-identical to an unprofiled pass's;
  3. every patch is removed exactly: the ``__dict__`` of every observed module, of the Python modules that define
     their classes, of the patched namespaces (``torch``, ``torch.nn.functional``, ``torch.Tensor``, ``torch._C._nn``,
     ``torch.linalg``, ``torch.fft``, ``torch.special``, ``torch.sparse``, ``torch.distributed``, the modules of
     ``torch.nn.attention``'s functions, ``torch._jit_internal``, ``torch.autograd.Function``, ``nn.Module``,
     ``threading.Thread``, ``_thread``, a loaded AOTInductor package's class, the observed modules' classes)
     identical to before, object for object (attributes that are Python modules imported meanwhile, and the model's
     own state, which no patch holds, left aside), and no module imported meanwhile holding a wrapper of the
     recorder's; also when the model raises mid-pass (a RuntimeError and a KeyboardInterrupt from a forward pre-hook
     in the recorded pass);
  4. every row has a function_name (SPEC: every kernel of a trace with a CPU side has one);
  5. the in-process frame equals ``load_run()`` of the run directory, and so do function_data's call counts;
  6. function_data follows SPEC: ``{name: [(calls, (args, kwargs)), ...]}``;
  7. describe_results() works and has SPEC's columns;
  8. a second profile() in the same process gives the same rows (module, call, operator, kernel) and call counts;
  9. where a program states what a user expects (notes ``modules``: {call: the modules its rows have}; ``calls``:
     {call: times it is made in a pass}), the rows and function_data say so.

    python benchmarks/cpu_sweep.py OUT [name ...] [--deadline SECONDS] [--device cuda] [--first-call]

``--first-call``: first_call.py's checks instead (profile() as each fresh model's first call, 0 and 1 warm-ups).

Models: the program files sweep_files.py lists (transformers architectures and ``generate()`` modes, torch mechanisms
around small modules, every torchvision builder and timm's families, which run alone with ``--only-zoo``). A model
its library cannot build here, or that fails without kernelscope (an unprofiled pass raises), is reported as skipped,
never as passed. Writes OUT/cpu_sweep.json and prints one line per model.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path

import pandas as pd
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))
from gpu_check import flatten  # noqa: E402
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.profiler import _run_pass  # noqa: E402
from sweep_files import factories  # noqa: E402
from sweep_patches import changes, snapshot  # noqa: E402

SUMMARY_COLUMNS = ["function_name", "calls", "num_distinct_samples", "num_modules", "time_spent_us",
                   "time_spent_pct", "tensor_size_MB"]  # fmt: skip
ROW_COLUMNS = ["module_name", "function_name", "op", "kernel"]


def bit_identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype or a.layout != b.layout:
        return False
    if a.is_sparse or a.is_quantized:
        a, b = (a.to_dense(), b.to_dense()) if a.is_sparse else (a.int_repr(), b.int_repr())
    if torch.equal(a, b):
        return True
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    return a.is_floating_point() and bool(torch.allclose(a, b, rtol=0, atol=0, equal_nan=True))


def capturing(fn, into: list):
    def call(*args, **kwargs):
        out = fn(*args, **kwargs)
        into.append([t.detach().clone() for t in flatten(out)])
        return out

    return call


class _Stop(RuntimeError):
    pass


def raising_midway(w, exc_type: type[BaseException]) -> list[str]:
    """profile() of a model that raises ``exc_type`` from a forward pre-hook in the recorded pass (or, where no
    module call reaches a hook while recording, after the pass's first call): what is not put back afterwards."""
    calls = [0]
    per_pass = [0]

    def counting(module, args):
        calls[0] += 1

    handle = nn.modules.module.register_module_forward_pre_hook(counting)
    try:
        with torch.no_grad():
            _run_pass(w.fn, w.samples)
    finally:
        handle.remove()
    per_pass[0] = max(calls[0], 1)
    seen = [0]

    def hook(module, args):
        if torch.compiler.is_compiling():  # traced into a compiled graph: the hook does nothing there
            return
        if torch.autograd.profiler._is_profiler_enabled:
            seen[0] += 1
            if seen[0] >= max(per_pass[0] // 2, 1):
                raise exc_type("stopped mid-pass")

    def fn(*args, **kwargs):
        out = w.fn(*args, **kwargs)
        if torch.autograd.profiler._is_profiler_enabled:
            raise exc_type("stopped after a call")
        return out

    before = snapshot(w)
    handle = nn.modules.module.register_module_forward_pre_hook(hook)
    raised = None
    try:
        ModuleFunctionKernelProfiler().profile(fn, w.samples, module=w.module, warmup_iterations=3)
    except exc_type:
        raised = True
    except BaseException as exc:  # noqa: BLE001
        raised = f"{type(exc).__name__}: {exc}"[:200]
    finally:
        handle.remove()
    found = changes(before)
    if raised is not True:
        found.append(f"raised {raised!r}, not {exc_type.__name__}")
    return found


def function_data_problems(data) -> list[str]:
    problems = []
    if not isinstance(data, dict):
        return [f"function_data is a {type(data).__name__}"]
    for name, entries in data.items():
        if not isinstance(name, str) or not name or name.startswith("ks.") or "#" in name:
            problems.append(f"key {name!r}")
        for entry in entries:
            ok = (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], int) and entry[0] > 0
                  and isinstance(entry[1], tuple) and len(entry[1]) == 2 and isinstance(entry[1][0], tuple)
                  and isinstance(entry[1][1], dict))  # fmt: skip
            if not ok:
                problems.append(f"{name}: entry {str(entry)[:80]}")
                break
    return problems[:5]


def counts(data: dict) -> dict:
    return {name: [calls for calls, _ in entries] for name, entries in data.items()}


def expectation_problems(notes: dict, frame: pd.DataFrame, data: dict) -> list[str]:
    """Where the rows or function_data differ from what the program says a user expects of them."""
    problems = []
    for name, modules in notes.get("modules", {}).items():
        found = set(frame.loc[frame["function_name"] == name, "module_name"].astype(object).fillna("<none>"))
        if found != set(modules):
            problems.append(f"{name}: rows in {sorted(found)}, expected {sorted(modules)}")
    for name, expected in notes.get("calls", {}).items():
        made = sum(calls for calls, _ in data.get(name, []))
        if made != expected:
            problems.append(f"{name}: {made} calls, expected {expected}")
    return problems


def rows(frame: pd.DataFrame) -> Counter:
    return Counter(frame[ROW_COLUMNS].astype(str).itertuples(index=False))


def check(w, out_root: Path) -> dict:
    result = {"workload": w.name, "description": w.description}
    warm = w.notes.get("reference_warm_up", 1)
    # "fresh": a factory of another model like it, which the unprofiled passes run, so that profile() makes the
    # model's first call (lazy modules, which cannot be copied before it)
    reference_fn = w.notes["fresh"]() if "fresh" in w.notes else w.fn
    reference = []
    try:
        with torch.no_grad():
            for _ in range(warm):
                _run_pass(reference_fn, w.samples)
            _run_pass(capturing(reference_fn, reference), w.samples)
    except Exception as exc:  # the program fails without kernelscope (CPU-only operators on CUDA): not a result
        result["skipped"] = f"fails unprofiled: {type(exc).__name__}: {str(exc)[:200]}"
        return result
    captured = []
    run_dir = out_root / w.name
    profiler = ModuleFunctionKernelProfiler()
    before = snapshot(w)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame, data = profiler.profile(capturing(w.fn, captured), w.samples, module=w.module,
                                       warmup_iterations=w.notes.get("warmup", 3), out=run_dir)  # fmt: skip
    result["profile_s"] = round(time.perf_counter() - start, 3)
    result["warnings"] = sorted({str(c.message)[:200] for c in caught if "kernelscope" in str(c.message)})
    result["patches_left"] = changes(before)
    # profile()'s last way out with compiled code: every kernel named by module, none by call (a failure to name)
    result["calls_unnamed"] = any("only modules and compiled modules were scoped" in w for w in result["warnings"])
    recorded = captured[-len(reference) :] if reference else []
    result["outputs_bit_identical"] = len(recorded) == len(reference) and all(
        len(r) == len(o) and all(bit_identical(a, b) for a, b in zip(r, o, strict=True))
        for r, o in zip(recorded, reference, strict=True)
    )
    result["rows"] = len(frame)
    unnamed = frame[frame["function_name"].isna()]
    result["unnamed_rows"] = len(unnamed)
    if len(unnamed):
        result["unnamed_ops"] = unnamed["op"].astype(str).value_counts().head(5).to_dict()
    result["functions"] = sorted(frame["function_name"].dropna().unique().tolist())[:40]
    with load_run(run_dir, allow_empty=True) as run:
        offline, offline_data = run.profiling_df(), run.function_data()
    try:
        pd.testing.assert_frame_equal(frame.drop(columns=["module"]), offline)
        result["in_process_equals_offline"] = counts(data) == counts(offline_data)
    except AssertionError as exc:
        result["in_process_equals_offline"] = False
        result["offline_diff"] = str(exc)[:300]
    result["function_data_problems"] = function_data_problems(data)
    result["expectations_unmet"] = expectation_problems(w.notes, frame, data)
    summary = profiler.describe_results(frame, data, top_k=10)
    result["describe_ok"] = list(summary.columns[: len(SUMMARY_COLUMNS)]) == SUMMARY_COLUMNS
    first_rows, first_counts = rows(frame), counts(data)
    profiler.release()

    again = ModuleFunctionKernelProfiler()
    warmup = w.notes.get("warmup", 3)
    frame2, data2 = again.profile(capturing(w.fn, []), w.samples, module=w.module, warmup_iterations=warmup)
    second_rows = rows(frame2)
    result["second_profile_same_rows"] = first_rows == second_rows
    if first_rows != second_rows:
        result["rows_only_first"] = [list(r) for r, _ in (first_rows - second_rows).most_common(4)]
        result["rows_only_second"] = [list(r) for r, _ in (second_rows - first_rows).most_common(4)]
    result["second_profile_same_calls"] = first_counts == counts(data2)
    again.release()
    if not w.notes.get("no_raise_check"):
        result["patches_left_after_error"] = raising_midway(w, _Stop)
        result["patches_left_after_interrupt"] = raising_midway(w, KeyboardInterrupt)
    result["ok"] = bool(
        not result["patches_left"] and result["outputs_bit_identical"] and not result["unnamed_rows"]
        and not result["calls_unnamed"]
        and result["in_process_equals_offline"] and not result["function_data_problems"] and result["describe_ok"]
        and not result["expectations_unmet"]
        and result["second_profile_same_rows"] and result["second_profile_same_calls"]
        and not result.get("patches_left_after_error") and not result.get("patches_left_after_interrupt")
    )  # fmt: skip
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("names", nargs="*")
    parser.add_argument("--deadline", type=float, default=3600, help="start no model after this many seconds")
    parser.add_argument("--only-zoo", action="store_true", help="only the torchvision and timm programs")
    parser.add_argument("--rest-of", type=Path, metavar="CPU_SWEEP_JSON",
                        help="leave out the programs that held in an earlier cpu_sweep.json")  # fmt: skip
    parser.add_argument("--device", help="torch.set_default_device(DEVICE) first: the programs' models and "
                        "inputs made there (cuda: the same programs and checks on a GPU)")  # fmt: skip
    parser.add_argument("--first-call", action="store_true",
                        help="first_call.py's checks instead: profile() as each fresh model's first call")  # fmt: skip
    args = parser.parse_args()
    if args.device:
        torch.set_default_device(args.device)
    made = factories()
    names = args.names or [n for n in made if not args.only_zoo or n.startswith(("tv_", "timm_"))]
    if args.rest_of:
        earlier = json.loads(args.rest_of.read_text())  # cpu_sweep.json, or the list of lines its log printed
        rows = earlier["results"] if isinstance(earlier, dict) else earlier
        held = {r["workload"] for r in rows if r.get("ok")}
        names = [n for n in names if n not in held]
    args.out.mkdir(parents=True, exist_ok=True)
    env = {"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "threads": torch.get_num_threads(),
           "device": args.device or "cpu"}  # fmt: skip
    results, began = [], time.perf_counter()
    print(json.dumps(env), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if time.perf_counter() - began > args.deadline:
                results.append({"workload": name, "skipped": "past the deadline"})
                continue
            start = time.perf_counter()
            if args.first_call:
                from first_call import check_first_call  # imports this file's checks

                results.append(check_first_call(name, made[name], Path(tmp)))
                results[-1]["check_s"] = round(time.perf_counter() - start, 2)
                print(json.dumps(results[-1], default=str), flush=True)
                continue
            torch.manual_seed(0)
            try:
                w = made[name]()
            except Exception as exc:  # a library that cannot build the model here: not a result
                results.append({"workload": name, "skipped": f"{type(exc).__name__}: {str(exc)[:200]}"})
            else:
                try:
                    results.append(check(w, Path(tmp)))
                except BaseException as exc:  # a failure of kernelscope on this model: the finding
                    results.append({"workload": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:500],
                                    "traceback": traceback.format_exc()[-3000:]})  # fmt: skip
                finally:  # a program that changed a global of torch's (nn.Module.__call__) puts it back
                    w.notes.get("cleanup", lambda: None)()
                del w
            results[-1]["check_s"] = round(time.perf_counter() - start, 2)
            print(json.dumps(results[-1], default=str), flush=True)
    (args.out / "cpu_sweep.json").write_text(json.dumps({"environment": env, "results": results}, default=str))
    done = [r for r in results if "skipped" not in r]
    print(f"{sum(r.get('ok', False) for r in done)} of {len(done)} hold every check; "
          f"{len(results) - len(done)} skipped", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
