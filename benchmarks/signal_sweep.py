"""SIGINT and SIGTERM sent to the writing commands after each of a range of delays, in a scratch folder each: sql -o
FILE.duckdb (over a trace of 100,000 kernels, and with a query that never ends), bench --scripts DIR, archive,
report -o FILE.html, analyze -o FILE.csv, record --out DIR (of a small model on the CPU).

    python benchmarks/signal_sweep.py [--delays 1,2,4,...] [--only sql|sql_endless|bench|archive|report|analyze|record]

Each case must exit 128 + the signal with one line (`kernelscope: interrupted` / `stopped by SIGTERM`), or 0 (the
output was whole before the signal: the command says so, or had ended); exit within 40 s of the signal; no
traceback; nothing hidden (a temporary or staging file) left in the folder, nothing left in its TMPDIR; on a
non-zero exit, no output. Prints one line per case and the count that broke a rule (exit 1 if any). The bench and
record cases need torch (bench's reads a recording of the small model made first).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNELSCOPE = str(Path(sys.executable).with_name("kernelscope"))
ENDLESS = "SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 3"
RECORDED = (
    "import torch\nfrom torch import nn\n\ndef small():\n    m = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), "
    "nn.Linear(64, 8))\n    return m, [((torch.randn(16, 64),), {}), ((torch.randn(32, 64),), {})]\n"
)


def kernels_trace(path: Path, n: int = 100_000) -> None:
    """A trace of one operator launching ``n`` kernels."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": n * 3 + 10,
               "args": {"External id": 1}}]  # fmt: skip
    for i in range(n):
        args = {"correlation": i, "External id": 1}
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": i * 3 + 1, "dur": 1, "args": args})  # fmt: skip
        events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": i * 3 + 2, "dur": 1,
                       "args": {**args, "device": 0, "stream": 7}})  # fmt: skip
    path.write_text(json.dumps({"traceEvents": events}))


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def case(name: str, argv: list[str], output: str, delay: float, signum: int, inputs: Path, scratch: Path) -> str:
    """One signalled run; the rules it broke, joined (empty: none)."""
    work = scratch / name
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(inputs, work, symlinks=True)
    (work / "tmp").mkdir()
    before = listing(work)
    env = dict(os.environ, TMPDIR=str(work / "tmp"))
    child = subprocess.Popen([KERNELSCOPE, *argv], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)  # fmt: skip
    time.sleep(delay)
    child.send_signal(signum)
    try:
        _, err = child.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        child.kill()
        _, err = child.communicate()
        err += "\nno exit 40 s after the signal"
    lines = [line for line in err.strip().splitlines() if "Warning" not in line]
    # torch's own cache of compiled kernels, which torch.profiler's first start makes in TMPDIR and keeps by design
    new = [p for p in listing(work) if p not in before and not p.startswith("tmp/torchinductor_")]
    broken = []
    if child.returncode not in (0, 128 + signum):
        broken.append(f"exit {child.returncode}")
    if "Traceback" in err or "no exit 40 s" in err or len(lines) > 1:
        broken.append("; ".join(lines[-2:]))
    if any(part.startswith(".") for p in new for part in Path(p).parts) or any(p.startswith("tmp/") for p in new):
        broken.append(f"left {[p for p in new if '/.' in '/' + p or p.startswith('tmp/')][:3]}")
    if child.returncode != 0 and any(p == output or p.startswith(output + "/") for p in new):
        broken.append(f"{output} left by a command that failed")
    said = lines[-1][:90] if lines else ""
    print(f"{name:12} {delay:5.2f} s {signal.Signals(signum).name:7} exit {child.returncode:4} {said} "
          f"{'BROKE: ' + ' | '.join(broken) if broken else ''}", flush=True)  # fmt: skip
    return " | ".join(broken)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delays", default="0.5,1,2,3,4,5,6,8,10,12,14,16,18")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    delays = [float(d) for d in args.delays.split(",")]
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch, inputs = Path(scratch_name), Path(scratch_name) / "inputs"
        inputs.mkdir()
        kernels_trace(inputs / "kernels.json")
        cases = {
            "sql": ["sql", "kernels.json", "SELECT 1", "-o", "out.duckdb"],
            "sql_endless": ["sql", "kernels.json", ENDLESS, "-o", "out.duckdb"],
            "archive": ["archive", "kernels.json", "--to", "arch"],
            "report": ["report", "kernels.json", "-o", "out.html"],
            "bench": ["bench", "run", "--device", "cpu", "--repeat", "200", "--warmup", "5", "--scripts", "scripts"],
            "analyze": ["analyze", "kernels.json", "-o", "out.csv"],
            "record": ["record", "recorded:small", "--warmup", "1", "--out", "recorded-run"],
        }
        outputs = {"sql": "out.duckdb", "sql_endless": "out.duckdb", "archive": "arch", "report": "out.html",
                   "bench": "scripts", "analyze": "out.csv", "record": "recorded-run"}  # fmt: skip
        if not args.only or args.only in ("bench", "record"):
            (inputs / "recorded.py").write_text(RECORDED)
            record = [KERNELSCOPE, "record", "recorded:small", "--warmup", "1", "--out", "run"]
            subprocess.run(record, cwd=inputs, check=True, capture_output=True)
        broken = 0
        for name, argv in cases.items():
            if args.only and args.only != name:
                continue
            for delay in delays:
                for signum in (signal.SIGINT, signal.SIGTERM):
                    broken += bool(case(name, argv, outputs[name], delay, signum, inputs, scratch))
    print(f"\n{broken} case(s) broke a rule")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
