"""Every GPU check in one process: record sample_traces/, check them, time profile() end to end.

Per workload of benchmarks/workloads.py:
  1. profile() (warmup 3 + record + export + analysis) into a run directory, timed end to end;
  2. its in-process result equals load_run() of the run directory it wrote;
  3. model outputs of the recorded pass are bit-identical to an unprofiled pass;
  4. kernel count and total kernel time against a plain torch.profiler run of the same pass;
  5. coverage: % of device time in rows, % with a named functional call;
  6. the same rows and samples as a reference recording without the recorder's shortcuts (each call keyed
     as it is made, a scope on every module: none folded into its call), and how many scopes each made;
  7. for torch.compile'd workloads: how compiled code was kept (manifest ``compiled_code``), that the compiled
     entries are the same objects after every recording, and the named share with 0 and 1 warm-ups too;
(the recorder's overhead is measured by recorder_overhead.py, which interleaves its variants.)

Usage: python benchmarks/gpu_check.py OUTDIR [workload ...] [--pack]
Writes OUTDIR/sample_traces/<workload>/ (run directories) and OUTDIR/gpu_check.json; prints a table. --pack puts
the run directories into OUTDIR/sample_traces-<n>.tar files of at most 15 MiB (what comes back from a device
machine: few files, 16 MiB each) and removes the directories. Without CUDA it runs the workloads it can on the
CPU (CPU operators stand in for kernels; the device-event columns are empty) and skips those marked needs_cuda.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pandas as pd
import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
import workloads  # noqa: E402
from compiled_frames import changed_entries, entry_identities  # noqa: E402
from kernelscope.analyzer import ingest, load_run  # noqa: E402
from kernelscope.recorder import (
    ModuleFunctionKernelProfiler,  # noqa: E402
    instrument,  # noqa: E402
    module_scopes,  # noqa: E402
)
from kernelscope.recorder import profiler as recorder_profiler  # noqa: E402
from workload import DEVICE  # noqa: E402

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
PACK_BYTES = 15 * 2**20


def synchronize() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def capturing(w, into: list):
    """``w.fn``, appending every call's output to ``into``."""

    def fn(*args, **kwargs):
        out = w.fn(*args, **kwargs)
        into.append(out)
        return out

    return fn


def one_pass(w, capture=None):
    """One pass without grad; ``capture``: a list that gets every call's output."""
    with torch.no_grad():
        w.one_pass(None if capture is None else capturing(w, capture))


def flatten(out):
    if isinstance(out, torch.Tensor):
        return list(out.unbind()) if out.is_nested else [out]  # torch.equal has no jagged layout
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in flatten(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in flatten(o)]
    if hasattr(out, "to_tuple"):
        return flatten(out.to_tuple())
    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        return [t for field in dataclasses.fields(out) for t in flatten(getattr(out, field.name))]
    return []


def bit_identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit for bit, NaN where the other has NaN (a random-init fp16 model's outputs can be NaN, which
    torch.equal never finds equal)."""
    if torch.equal(a, b):
        return True
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.allclose(a, b, rtol=0, atol=0, equal_nan=True))


def plain_profiler():
    return profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else []))


def trace_device_events(path: Path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        events = json.load(f)["traceEvents"]
    device = [e for e in events if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS]
    return len(device), sum(float(e["dur"]) for e in device)


def check(w, out_root: Path) -> dict:
    result = {"workload": w.name, "description": w.description}
    one_pass(w)  # warm the caches of compile / cudnn before the unprofiled reference outputs
    synchronize()
    reference = []
    one_pass(w, reference)
    reference = [t.clone() for o in reference for t in flatten(o)]

    # 1. profile() end to end, capturing the recorded pass's outputs
    captured = []
    run_dir = out_root / w.name
    profiler = ModuleFunctionKernelProfiler(sample_tensor_limit_mb=w.sample_tensor_limit_mb)
    entries_before = entry_identities(collect_first=True)
    synchronize()
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame, data = profiler.profile(
            capturing(w, captured), w.samples, module=w.module, warmup_iterations=3, out=run_dir
        )
    result["profile_e2e_s"] = time.perf_counter() - start
    result["warnings"] = [str(c.message)[:300] for c in caught if str(c.message).startswith("kernelscope")]
    result["compiled_code"] = profiler.run.manifest.get("compiled_code")
    recorded = [t for o in captured[-(len(w.samples or [None])) :] for t in flatten(o)]
    result["outputs_bit_identical"] = len(recorded) == len(reference) and all(
        bit_identical(a, b) for a, b in zip(recorded, reference, strict=True)
    )

    # 2. in-process == offline
    with load_run(run_dir) as run:
        offline = run.profiling_df()
        offline_data = run.function_data()
        lc = run.launch_check()
        result["native_parts"] = len(run.header.native_parts)
        result["duckdb_parts"] = run.header.duckdb_parts
        native_events = run.sql("SELECT * FROM events ORDER BY event_id")
    # the native reader against DuckDB's, on this fresh trace: the same events and rows
    reader, ingest.native_reader = ingest.native_reader, None
    try:
        with load_run(run_dir) as run:
            result["readers_agree"] = bool(
                native_events.equals(run.sql("SELECT * FROM events ORDER BY event_id"))
                and offline.equals(run.profiling_df())
            )
    finally:
        ingest.native_reader = reader
    try:
        pd.testing.assert_frame_equal(frame.drop(columns=["module"]), offline)
        same_counts = {k: [c for c, _ in v] for k, v in data.items()} == {
            k: [c for c, _ in v] for k, v in offline_data.items()
        }
        result["in_process_equals_offline"] = bool(same_counts)
    except AssertionError as exc:
        result["in_process_equals_offline"] = False
        result["offline_diff"] = str(exc)[:500]
    result["launch_check_ok"] = lc.ok
    result["lost_launches"] = lc.launches_without_device_event
    result["lost_launch_of_device_events"] = lc.device_events_without_launch

    # 4. plain profiler, same pass
    with tempfile.TemporaryDirectory() as tmp:
        with plain_profiler() as prof:
            one_pass(w)
            synchronize()
        plain_trace = Path(tmp) / "plain.json"
        prof.export_chrome_trace(str(plain_trace))
        plain_kernels, plain_us = trace_device_events(plain_trace)
    ks_kernels, ks_trace_us = trace_device_events(run_dir / "trace.json.gz")
    result.update(
        rows=len(frame),
        trace_device_events=ks_kernels,
        plain_device_events=plain_kernels,
        rows_device_us=float(frame["kernel_us"].sum()),
        trace_device_us=ks_trace_us,
        plain_device_us=plain_us,
        # the recorded pass ran the program as it runs unprofiled: as many device events as a plain profiled pass
        same_device_events_as_plain=ks_kernels == plain_kernels,
    )

    # 5. coverage
    total = float(frame["kernel_us"].sum())
    result["pct_time_in_rows"] = 100.0 * total / ks_trace_us if ks_trace_us else float("nan")
    result["pct_time_named_function"] = named_share(frame)
    unnamed = frame[frame["function_name"].isna()]
    result["unnamed_ops"] = unnamed.groupby("call_op", dropna=False)["kernel_us"].sum().nlargest(5).to_dict()
    with_module = float(frame.loc[frame["module_name"].notna(), "kernel_us"].sum())
    result["pct_time_in_module"] = 100.0 * with_module / total if total else float("nan")

    # 5b. coverage of the functional namespace alone (what aitune's profiler can see)
    with tempfile.TemporaryDirectory() as tmp:
        narrow = ModuleFunctionKernelProfiler(sample_tensor_limit_mb=0, calls="functional")
        narrow_frame, _ = narrow.profile(w.fn, w.samples, module=w.module, warmup_iterations=1, out=Path(tmp) / "r")
        narrow_total = float(narrow_frame["kernel_us"].sum())
        narrow_named = float(narrow_frame.loc[narrow_frame["function_name"].notna(), "kernel_us"].sum())
        result["pct_time_named_functional_only"] = 100.0 * narrow_named / narrow_total if narrow_total else None
        narrow.release()

    # 5c. the cost of keeping the distinct input tensors (samples.pt), for the runs that drop them
    if w.sample_tensor_limit_mb == 0:
        with tempfile.TemporaryDirectory() as tmp:
            keeping = ModuleFunctionKernelProfiler(sample_tensor_limit_mb=None)
            synchronize()
            start = time.perf_counter()
            keeping.profile(w.fn, w.samples, module=w.module, warmup_iterations=3, out=Path(tmp) / "r")
            result["profile_e2e_with_tensors_s"] = time.perf_counter() - start
            result["sample_tensors_MB"] = (Path(tmp) / "r" / "samples.pt").stat().st_size / 2**20
            keeping.release()

    # 6. the recording as profile() makes it (samples keyed after the pass from the warm-up's prediction; module
    # scopes folded into their single call; no scope on nn.Sequential) == a reference recording keyed as each call
    # is made (a hold limit of 0 holds no input), with a scope on every module; threads may order first calls
    # differently
    result["sample_keys"] = profiler.run.manifest.get("sample_keys")
    with tempfile.TemporaryDirectory() as tmp:
        reference = ModuleFunctionKernelProfiler(sample_tensor_limit_mb=0)
        with every_module_scoped_and_keyed_per_call():
            reference_frame, _ = reference.profile(
                w.fn, w.samples, module=w.module, warmup_iterations=3, out=Path(tmp) / "r"
            )
        result["reference_sample_keys"] = reference.run.manifest.get("sample_keys")
        columns = ["module_name", "function_name", "sample_id", "op", "kernel"]

        def rows(f):
            return Counter(f[columns].astype(str).itertuples(index=False))

        def scopes(run):
            return run.sql("SELECT count(*) AS n FROM events WHERE name LIKE 'ks.%'")["n"].iloc[0]

        here, there = rows(frame), rows(reference_frame)
        result["rows_equal_reference"] = here == there
        if here != there:  # what differs, to look into offline: (row, count) of each side's surplus
            result["rows_only_here"] = [(list(r), n) for r, n in (here - there).most_common(8)]
            result["rows_only_reference"] = [(list(r), n) for r, n in (there - here).most_common(8)]
        result["samples_equal_reference"] = profiler.book.metadata() == reference.book.metadata()
        result["scopes"], result["reference_scopes"] = int(scopes(profiler.run)), int(scopes(reference.run))
        reference.release()

    # 7. compiled code: recorded again with 0 and 1 warm-ups; the compiled entries never change
    if w.compiled:
        for warmup_iterations in (0, 1):
            with tempfile.TemporaryDirectory() as tmp:
                again = ModuleFunctionKernelProfiler(sample_tensor_limit_mb=0)
                again_frame, _ = again.profile(
                    w.fn, w.samples, module=w.module, warmup_iterations=warmup_iterations, out=Path(tmp) / "r"
                )
                result[f"pct_time_named_warmup_{warmup_iterations}"] = named_share(again_frame)
                result[f"compiled_code_warmup_{warmup_iterations}"] = again.run.manifest.get("compiled_code")
                again.release()
        changed = changed_entries(entries_before, entry_identities(collect_first=True))
        result["compiled_entries_unchanged"] = not changed
        if changed:
            result["compiled_entries_changed"] = changed

    profiler.release()
    return result


def named_share(frame: pd.DataFrame) -> float:
    """% of the rows' time (device time; CPU operator time on the CPU) with a named call."""
    total = float(frame["kernel_us"].sum())
    named = float(frame.loc[frame["function_name"].notna(), "kernel_us"].sum())
    return 100.0 * named / total if total else float("nan")


@contextmanager
def every_module_scoped_and_keyed_per_call() -> Iterator[None]:
    """Recordings without the recorder's shortcuts: each call keyed as it is made (a hold limit of 0 holds no
    input), a scope on every module (none folded into its call, nn.Sequential scoped)."""
    with (
        mock.patch.object(recorder_profiler, "hold_limit_bytes", lambda device, book: 0),
        mock.patch.object(instrument, "folds_into_its_call", lambda module: False),
        mock.patch.object(module_scopes, "only_calls_its_children", lambda module: False),
    ):
        yield


def environment() -> dict:
    try:
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        driver = None
    return {
        "date": time.strftime("%Y-%m-%d"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "driver": driver,
        "gpu": torch.cuda.get_device_name() if DEVICE == "cuda" else None,
        "device": DEVICE,
        "python": platform.python_version(),
        "native_reader": ingest.native_reader is not None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("workloads", nargs="*", help="factory names of benchmarks/workloads.py (default: all)")
    parser.add_argument("--pack", action="store_true", help="pack the run directories into tars of <= 15 MiB")
    args = parser.parse_args()
    out, wanted = args.out, set(args.workloads)
    unknown = wanted - {factory.__name__ for factory in workloads.ALL}
    if unknown:
        parser.error(f"no such workload: {', '.join(sorted(unknown))}")
    traces = out / "sample_traces"
    traces.mkdir(parents=True, exist_ok=True)
    env = environment()
    print(json.dumps(env), flush=True)
    results = []
    for factory in workloads.ALL:
        if wanted and factory.__name__ not in wanted:
            continue
        if DEVICE != "cuda" and getattr(factory, "needs_cuda", False):
            results.append({"workload": factory.__name__, "skipped": "needs CUDA"})
            print(json.dumps(results[-1]), flush=True)
            continue
        start = time.perf_counter()
        try:
            w = factory()
            results.append(check(w, traces))
        except Exception as exc:  # one failing workload must not hide the others' results
            results.append(
                {
                    "workload": factory.__name__,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc()[-3000:],
                }
            )
        results[-1]["check_s"] = time.perf_counter() - start
        print(json.dumps(results[-1], default=str), flush=True)
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    (out / "gpu_check.json").write_text(json.dumps({"environment": env, "results": results}, indent=2, default=str))
    if args.pack:
        print("packed:", ", ".join(path.name for path in pack(traces, out)), flush=True)
    columns = [
        "workload", "rows", "plain_device_events", "same_device_events_as_plain", "pct_time_in_rows",
        "pct_time_named_function", "pct_time_named_functional_only", "in_process_equals_offline",
        "outputs_bit_identical", "launch_check_ok", "profile_e2e_s", "profile_e2e_with_tensors_s", "sample_tensors_MB",
        "sample_keys", "rows_equal_reference", "samples_equal_reference", "scopes", "reference_scopes",
        "compiled_code", "pct_time_named_warmup_0", "pct_time_named_warmup_1", "compiled_entries_unchanged",
    ]  # fmt: skip
    table = pd.DataFrame(results).reindex(columns=columns)
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.precision", 3):
        print(table.to_string(index=False))


def pack(traces: Path, out: Path) -> list[Path]:
    """Move the run directories under ``traces`` into ``out/sample_traces-<n>.tar`` files of at most PACK_BYTES each
    (a run larger than that alone in its tar); the traces are gzip already, so the tars are not compressed."""
    runs = sorted(path for path in traces.iterdir() if path.is_dir())
    groups: list[list[Path]] = []
    size = PACK_BYTES
    for run in runs:
        run_bytes = sum(f.stat().st_size for f in run.rglob("*") if f.is_file())
        if size + run_bytes > PACK_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(run)
        size += run_bytes
    tars = []
    for n, group in enumerate(groups):
        tars.append(out / f"sample_traces-{n}.tar")
        with tarfile.open(tars[-1], "w") as tar:
            for run in group:
                tar.add(run, arcname=f"sample_traces/{run.name}")
    shutil.rmtree(traces)
    return tars


if __name__ == "__main__":
    main()
