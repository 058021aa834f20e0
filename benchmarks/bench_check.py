"""kernelscope bench on real workloads: record BERT and the UNet block with their samples kept, replay ``linear``
of BERT and ``scaled_dot_product_attention`` of the UNet block, recorded against replayed µs per sample, with a
torch.compile'd version of each as the alternative (bench_alternatives.py) and its projected saving.

Usage: python benchmarks/bench_check.py OUTDIR [--repeat N] [--warmup N] [--compile-backend B] [--compile-mode M]

On a CUDA machine: benchmarks/workloads.py's ``bert`` (bf16) and ``unet_block`` (fp16). Each call is replayed twice:
with the L2 cleared before every timed call (kernelscope's default) and with it left warm (``flush_l2=False``),
which brackets the recorded pass, whose activations come warm from the call before and whose weights do not.
Then the same bench through the command line (``kernelscope bench ... --against ... --scripts``) on the UNet run,
and the script it wrote, run on its own.
Without CUDA: the same code path on the CPU, small: a 2-layer BERT (hidden 64) if transformers is installed, else
kernelscope's demo model in its place, the UNet block at 64 channels and 16x16, torch.compile with the ``eager``
backend unless --compile-backend says otherwise.

Writes OUTDIR/runs/<workload>/ (run directories with samples.pt), OUTDIR/bench_check.json, OUTDIR/scripts/ and
OUTDIR/cli_unet_block.json; prints a table per workload.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import torch

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import bench_alternatives  # noqa: E402
import workloads  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.bench import bench, bench_savings  # noqa: E402
from kernelscope.recorder.git_head import git_commit  # noqa: E402

CUDA = torch.cuda.is_available()
WITHIN = 0.10  # "agree": the replayed time within 10 % of the recorded one


def bert_case():
    if CUDA:
        return workloads.bert()
    try:
        from transformers import BertConfig, BertModel
    except ImportError:
        from kernelscope.demo import demo_workload

        model, samples = demo_workload("cpu", torch.float32)
        return workloads.Workload("bert", model, samples, model, "stand-in: kernelscope's demo model (no transformers)")
    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
    model = BertModel(config).eval()
    ids = torch.randint(0, 1000, (2, 16))
    samples = [((), {"input_ids": ids, "attention_mask": torch.ones_like(ids)})]
    return workloads.Workload("bert", model, samples, model, "a 2-layer BERT, hidden 64, batch 2, seq 16, fp32 (CPU)")


def unet_case():
    if CUDA:
        return workloads.unet_block()
    model = workloads.UNetBlock(64, 4).eval()
    samples = [((torch.randn(1, 64, 16, 16), torch.randn(1, 512)), {})]
    return workloads.Workload("unet_block", model, samples, model, "UNet block, 64 channels, 16x16, fp32 (CPU)")


CASES = [
    (bert_case, "linear", "compiled_linear", bench_alternatives._linear),
    (unet_case, "scaled_dot_product_attention", "compiled_sdpa", bench_alternatives._scaled_dot_product_attention),
]


def record(w, out: Path) -> float:
    profiler = ModuleFunctionKernelProfiler(sample_tensor_limit_mb=None)
    start = time.perf_counter()
    profiler.profile(w.fn, w.samples, module=w.module, warmup_iterations=3, out=out, overwrite=True)
    elapsed = time.perf_counter() - start
    profiler.release()
    return elapsed


def agreement(frame: pd.DataFrame) -> dict:
    """How close the replayed times of the original are to the recorded ones."""
    ratios = frame.loc[(frame["implementation"] == "original") & (frame["status"] == "ok"), "ratio"].dropna()
    return {
        "samples": int(len(ratios)),
        "within_10pct": int(((ratios - 1).abs() <= WITHIN).sum()),
        "median_ratio": float(ratios.median()) if len(ratios) else None,
        "min_ratio": float(ratios.min()) if len(ratios) else None,
        "max_ratio": float(ratios.max()) if len(ratios) else None,
    }


def records(frame: pd.DataFrame) -> list[dict]:
    return json.loads(frame.to_json(orient="records"))  # NaN -> null


def run_case(make, function: str, alternative: str, plain, out: Path, options) -> dict:
    w = make()
    run_dir = out / "runs" / w.name
    result = {"workload": w.name, "description": w.description, "function": function, "run": str(run_dir)}
    result["record_s"] = record(w, run_dir)
    compiled = bench_alternatives.compiled(plain, options.compile_backend, options.compile_mode)
    start = time.perf_counter()
    frame = bench(run_dir, [function], repeat=options.repeat, warmup=options.warmup, against={alternative: compiled})
    result["bench_s"] = time.perf_counter() - start
    result["rows"] = records(frame)
    result["savings"] = records(bench_savings(frame))
    result["agreement_cold_l2"] = agreement(frame)
    if CUDA:
        warm = bench(run_dir, [function], repeat=options.repeat, warmup=options.warmup, flush_l2=False)
        result["rows_warm_l2"] = records(warm)
        result["agreement_warm_l2"] = agreement(warm)
        frame = frame.merge(
            warm[["sample_id", "implementation", "replayed_us"]].rename(columns={"replayed_us": "warm_l2_us"}),
            on=["sample_id", "implementation"],
            how="left",
        )
    show(w, function, frame, bench_savings(frame))
    return result


def show(w, function: str, frame: pd.DataFrame, saved: pd.DataFrame) -> None:
    original = frame[frame["implementation"] == "original"].set_index("sample_id")
    alternative = frame[frame["implementation"] != "original"].set_index("sample_id")
    columns = ["calls", "recorded_us", "replayed_us", "min_us", "max_us", "ratio"]
    table = original[columns + (["warm_l2_us"] if "warm_l2_us" in original else [])].copy()
    table["compiled_us"] = alternative["replayed_us"]
    table["speedup"] = alternative["speedup"]
    table["status"] = alternative["status"]
    table["signature"] = original["signature"].str.slice(0, 70)
    print(f"\n{w.name}: {function} ({w.description}), recorded on {frame['recorded_on'].iloc[0]}")
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    for row in saved.itertuples(index=False):
        share = "n/a" if math.isnan(row.saving_pct) else f"{row.saving_pct:.2f}% of the pass"
        print(f"projected saving of {row.implementation}: {row.saving_us:.1f} µs ({share}), {row.speedup:.3f}x")


def command_line(out: Path, options) -> dict:
    """``kernelscope bench`` on the UNet run with the compiled alternative and --scripts; then the script."""
    run_dir, scripts = out / "runs" / "unet_block", out / "scripts"
    target = out / "cli_unet_block.json"
    args = [
        sys.executable, "-c", "from kernelscope.cli import main; main()", "bench", str(run_dir),
        "--function", "scaled_dot_product_attention", "--against", "compiled=bench_alternatives:compiled_sdpa",
        "--repeat", str(options.repeat), "--warmup", str(options.warmup), "--scripts", str(scripts),
        "-o", str(target), "--force",
    ]  # fmt: skip
    env = {**os.environ, "KERNELSCOPE_COMPILE_BACKEND": options.compile_backend}
    if options.compile_mode:
        env["KERNELSCOPE_COMPILE_MODE"] = options.compile_mode
    done = subprocess.run(args, cwd=HERE, capture_output=True, text=True, env=env, timeout=600)
    result = {"exit_code": done.returncode, "stderr": done.stderr[-2000:], "rows": _lines(target)}
    script = scripts / "scaled_dot_product_attention.py"
    ran = subprocess.run(
        [sys.executable, str(script), "--repeat", str(options.repeat), "--warmup", str(options.warmup)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    result["script"] = {"exit_code": ran.returncode, "stdout": ran.stdout, "stderr": ran.stderr[-2000:]}
    print(f"\nkernelscope bench (command line) exit {done.returncode}; {script.name} exit {ran.returncode}:")
    print(ran.stdout)
    return result


def _lines(path: Path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def environment() -> dict:
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name() if CUDA else None,
        "python": platform.python_version(),
        "host": platform.node(),
        "git_commit": git_commit(HERE),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--repeat", type=int, default=100 if CUDA else 5)
    parser.add_argument("--warmup", type=int, default=20 if CUDA else 1)
    parser.add_argument("--compile-backend", default="inductor" if CUDA else "eager")
    parser.add_argument("--compile-mode", default=None)
    options = parser.parse_args()
    (options.out / "runs").mkdir(parents=True, exist_ok=True)
    result = {
        "environment": environment(),
        "repeat": options.repeat,
        "warmup": options.warmup,
        "compile_backend": options.compile_backend,
        "compile_mode": options.compile_mode,
        "cases": [],
    }
    for make, function, alternative, plain in CASES:
        result["cases"].append(run_case(make, function, alternative, plain, options.out, options))
    result["command_line"] = command_line(options.out, options)
    (options.out / "bench_check.json").write_text(json.dumps(result, indent=1))
    print(f"\nwrote {options.out / 'bench_check.json'}")


if __name__ == "__main__":
    main()
