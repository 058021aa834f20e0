"""Every GPU measurement of one lease in one command: the steps run one after another, each in a process of its
own with its own time limit, so that one that hangs or fails costs only its share; their outputs are packed for
the trip back.

    python benchmarks/gpu_session.py OUT [--deadline SECONDS] STEP[=WORKLOAD,...]...

STEP is ``check`` (gpu_check.py, every workload, run directories kept), ``sweep`` (model_sweep.py), ``named``
(named_share.py), ``frames``
(frames_vs_recording.py), ``notices`` (kineto_notices.py), ``tp`` (tensor_parallel_job.py, world size 1 on NCCL),
``bench`` (bench_check.py), ``overhead`` (recorder_overhead.py), ``aitune`` (profile_vs_aitune.py), ``stages``
(profile_stages.py), ``scaling``
(profile_scaling.py), ``threads`` (duckdb_threads.py: the demo and 10 MB-100 MB traces per DuckDB thread
count), ``cores`` (analyzer_cores.py), ``cores_stages`` (the same at 2-16 cores with each load's
stages timed: load_stages.py), ``cores_gzip`` (analyzer_cores.py, the .json against the .json.gz of indexed members
the recorder writes, 2-16 cores), ``cores_unordered`` (cores_stages under DuckDB's preserve_insertion_order = false),
``cpu_sweep_cuda`` (cpu_sweep.py's programs with CUDA torch's default device, zoo last, until its deadline);
``=WORKLOAD,...`` names the workloads of check, sweep, frames, overhead (default: all) and stages (default: tiny,
mlp and transformer_encoder; any of profile_vs_aitune.py's). Each step writes under a
scratch folder's work/<step>/ and its output goes to work/<step>.log; at the end work/ is packed, sample tensors
(``*.pt``) and plain traces left out, into OUT/part-aa, part-ab… (tar.gz cut into 15 MiB pieces: ``cat part-* | tar
xz`` joins them), and a summary line per step (status, seconds) is printed and written to OUT/steps.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def commands(
    work: Path, chosen: dict[str, list[str]], rest_of: Path | None = None
) -> dict[str, tuple[list[str], int]]:
    """step → (argv, time limit in seconds)."""
    py = [sys.executable, "-u"]
    workloads = {step: names for step, names in chosen.items() if names}
    return {
        "check": (py + [str(HERE / "gpu_check.py"), str(work / "check"), *workloads.get("check", [])], 330),
        "named": (py + [str(HERE / "named_share.py"), "--out", str(work / "named")], 120),
        "sweep": (
            py + [str(HERE / "model_sweep.py"), str(work / "sweep"), "--deadline", "240", *workloads.get("sweep", [])],
            300,
        ),
        "frames": (
            py
            + [
                str(HERE / "frames_vs_recording.py"),
                str(work / "frames" / "frames.json"),
                *workloads.get("frames", []),
            ],
            150,
        ),
        "notices": (py + [str(HERE / "kineto_notices.py"), "demo", "mlp"], 60),
        "tp": (
            py + [str(HERE / "tensor_parallel_job.py"), str(work / "tp"), "--world-size", "1", "--backend", "nccl"],
            90,
        ),
        "bench": (py + [str(HERE / "bench_check.py"), str(work / "bench")], 240),
        "overhead": (
            py
            + [str(HERE / "recorder_overhead.py"), "--json", str(work / "overhead" / "overhead.json")]
            + workloads.get("overhead", []),
            240,
        ),
        "aitune": (
            py
            + [str(HERE / "profile_vs_aitune.py"), "--device", "cuda", "--rounds", "5"]
            + ["--out", str(work / "aitune" / "profile_vs_aitune.json")],
            240,
        ),
        "stages": (
            py
            + [str(HERE / "profile_stages.py"), "--device", "cuda", "--workloads"]
            + [",".join(workloads.get("stages", ["tiny", "mlp", "transformer_encoder"]))]
            + ["--out", str(work / "stages" / "profile_stages.json")],
            120,
        ),
        "scaling": (py + [str(HERE / "profile_scaling.py")], 150),
        "threads": (
            py + [str(HERE / "duckdb_threads.py"), "--scaled", "10MB,100MB", "--threads", "1,2,4,0", "--rounds", "2"],
            240,
        ),
        "cores": (
            py
            + [str(HERE / "analyzer_cores.py"), "--size", "1GB", "--repeat", "2", "--workdir", "/tmp/ks-bench"]
            + ["--out", str(work / "cores" / "analyzer_cores.json")],
            240,
        ),
        "cores_stages": (
            py
            + [str(HERE / "analyzer_cores.py"), "--size", "1GB", "--repeat", "1", "--workdir", "/tmp/ks-bench"]
            + ["--cores", "2,4,8,16", "--stages", "--out", str(work / "cores_stages" / "analyzer_cores_stages.json")],
            240,
        ),
        "cores_gzip": (
            py
            + [str(HERE / "analyzer_cores.py"), "--size", "1GB", "--repeat", "2", "--workdir", "/tmp/ks-bench"]
            + ["--cores", "2,4,8,16", "--gzip", "--members"]
            + ["--out", str(work / "cores_gzip" / "analyzer_cores_gzip.json")],
            300,
        ),
        "cpu_sweep_cuda": (
            py
            # the program names follow OUT: argparse takes no positional after the options once OUT is read
            + [str(HERE / "cpu_sweep.py"), str(work / "cpu_sweep_cuda")]
            + workloads.get("cpu_sweep_cuda", [])
            + ["--device", "cuda", "--deadline", "470"]
            + (["--rest-of", str(rest_of)] if rest_of else []),
            540,
        ),
        "cores_unordered": (
            py
            + [str(HERE / "analyzer_cores.py"), "--size", "1GB", "--repeat", "1", "--workdir", "/tmp/ks-bench"]
            + ["--cores", "2,4,8,16", "--stages", "--setting", "preserve_insertion_order=false"]
            + ["--out", str(work / "cores_unordered" / "analyzer_cores_unordered.json")],
            240,
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("steps", nargs="+")
    parser.add_argument("--deadline", type=float, default=560, help="seconds for all steps together")
    parser.add_argument("--sweep-rest-of", type=Path, metavar="CPU_SWEEP_JSON",
                        help="cpu_sweep_cuda leaves out the programs that held there (--rest-of)")  # fmt: skip
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="kernelscope-gpu-session-"))
    work = scratch / "work"
    work.mkdir()
    chosen = {step: names.split(",") if names else [] for step, _, names in (s.partition("=") for s in args.steps)}
    known = commands(work, chosen, args.sweep_rest_of)
    unknown = [step for step in chosen if step not in known]
    if unknown:
        parser.error(f"no such step: {', '.join(unknown)}")
    started, summary = time.monotonic(), []
    for step in chosen:
        argv, limit = known[step]
        left = args.deadline - (time.monotonic() - started)
        if left < 20:
            summary.append({"step": step, "status": "not run: the deadline was near"})
            continue
        (work / step).mkdir(exist_ok=True)
        began = time.monotonic()
        with open(work / f"{step}.log", "w") as log:
            try:
                done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=min(limit, left - 15))
                status = f"exit {done.returncode}"
            except subprocess.TimeoutExpired:
                status = "stopped at its time limit"
        summary.append({"step": step, "status": status, "seconds": round(time.monotonic() - began, 1)})
        print(json.dumps(summary[-1]), flush=True)
    (args.out / "steps.json").write_text(json.dumps(summary, indent=1))
    packed = subprocess.run(
        f"tar czf - --exclude='*.pt' --exclude='*.plain.json*' -C {scratch} work | split -b 15M - {args.out}/part-",
        shell=True,
        env=os.environ,
    )
    print(json.dumps({"packed": packed.returncode == 0, "parts": sorted(p.name for p in args.out.glob("part-*"))}))


if __name__ == "__main__":
    main()
