"""Analyzer throughput and scaling, side by side with reading the bytes, orjson and HTA, in one run.

For each size, scale_trace.py writes a scaled real trace as .json and .json.gz. Each step then runs in a
child process of its own, so that its peak RSS (os.wait4's ru_maxrss) is its own:
  read         the bytes, 8 MB at a time (gzip: decompressed with isal, as the analyzer does): the floor
  orjson       orjson.loads of the whole file (gzip: decompressed first), GC off: parsing alone
  kernelscope  load_run(path), through the kernels table (attribution done)
  ks_duckdb    the same with the native reader turned off: every part read by DuckDB's JSON reader (the
               analyzer where no C compiler built it)
  hta          HolisticTraceAnalysis's TraceAnalysis(trace_dir=...) on the same file (its load)
Wall time is measured inside the child around the step only (imports excluded), up to the moment its result
is there: what it built (the Run, orjson's document, HTA's TraceAnalysis) is freed after the clock stops, and that
teardown is reported on its own. CPU is the child's user+sys time over the measured span, all threads; each step
is run --repeat times, best wall time kept.

    pip install HolisticTraceAnalysis   # into the venv, for the hta step only
    python benchmarks/analyzer_throughput.py --sizes 10MB,100MB,300MB,1GB --repeat 3 --workdir /tmp/ks-bench \\
        --out benchmarks/results/analyzer_throughput_<machine>_<date>.json

Prints each step's result as a JSON line as it comes, then two markdown tables: per size and file kind (wall, CPU,
MB/s, peak RSS and its ratio to the JSON, HTA's and orjson's time over kernelscope's, the DuckDB reader's), and the
scaling table (per 100 MB of JSON: flat means linear growth). --out keeps every measurement with the machine's
versions; benchmarks/RESULTS.md says how its numbers were read.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import date
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import scale_trace  # noqa: E402

STEPS = ("read", "orjson", "kernelscope", "ks_duckdb", "hta")
MB = 1e6


# ---- child side: one step, one process --------------------------------------------------------------


def _open_gz(path: str):
    from isal import igzip

    return igzip.open(path, "rb")


def step_read(path: str):
    def read() -> tuple[dict, object]:
        total = 0
        with _open_gz(path) if path.endswith(".gz") else open(path, "rb") as f:
            while chunk := f.read(8 << 20):
                total += len(chunk)
        return {"bytes": total}, None

    return read


def step_orjson(path: str):
    import gc

    import orjson

    def parse() -> tuple[dict, object]:
        with _open_gz(path) if path.endswith(".gz") else open(path, "rb") as f:
            data = f.read()
        gc.disable()
        document = orjson.loads(data)
        return {"events": len(document["traceEvents"])}, document

    return parse


def step_kernelscope(path: str):
    from kernelscope.analyzer import load_run

    limit = os.environ.get("KS_BENCH_MEMORY_LIMIT")

    def analyze() -> tuple[dict, object]:
        run = load_run(path, memory_limit=limit) if limit else load_run(path)
        header = run.header
        return {
            "rows": run.con.execute("SELECT count(*) FROM kernels").fetchone()[0],
            "native_parts": len(getattr(header, "native_parts", [])),  # older analyzers lack the field
            "duckdb_parts": getattr(header, "duckdb_parts", None),
        }, run

    return analyze


def step_ks_duckdb(path: str):
    from kernelscope.analyzer import ingest

    ingest.native_reader = None
    return step_kernelscope(path)


def step_hta(path: str):
    import logging

    from hta.trace_analysis import TraceAnalysis

    logging.disable(logging.CRITICAL)

    def load() -> tuple[dict, object]:
        with tempfile.TemporaryDirectory(prefix="hta-") as folder:
            os.symlink(os.path.abspath(path), os.path.join(folder, os.path.basename(path)))
            analysis = TraceAnalysis(trace_dir=folder)
            return {"rows": len(analysis.t.get_trace(0))}, analysis

    return load


def child(step: str, path: str) -> None:
    cores = os.environ.get("KS_BENCH_CORES")
    if cores:  # analyzer_cores.py: this many cores, and as many DuckDB threads (and so reader threads)
        use_cores(int(cores))
    work = globals()[f"step_{step}"](path)  # imports happen here, outside the measured span
    baseline = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    staged = step.startswith("ks_") or step == "kernelscope"
    with stage_timers(staged and bool(os.environ.get("KS_BENCH_STAGES"))) as stages:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        result, built = work()
        wall = time.perf_counter() - start
    if stages is not None:  # load_stages.py: the load's wall time stage by stage
        result["stages"] = stages.as_dict(wall)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
    start = time.perf_counter()
    del built
    teardown = time.perf_counter() - start
    print(
        "RESULT " + json.dumps({"wall": wall, "cpu": cpu, "teardown": teardown, "baseline_rss": baseline, **result}),
        flush=True,
    )


@contextmanager
def stage_timers(enabled: bool):
    """load_stages.timed() where ``enabled`` (KS_BENCH_STAGES: analyzer_cores.py --stages), else None."""
    if not enabled:
        yield None
        return
    import load_stages

    with load_stages.timed() as stages:
        yield stages


def use_cores(count: int) -> None:
    """Run on the first ``count`` cores this process may use, with DuckDB's threads set to ``count`` in every
    connection the analyzer makes (DuckDB counts the machine's cores, not the process's)."""
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:count])
    from kernelscope.analyzer import connection

    made = connection.connect

    settings = json.loads(os.environ.get("KS_BENCH_SETTINGS", "{}"))  # analyzer_cores.py --setting

    def connect(*args, **kwargs):
        con = made(*args, **kwargs)
        con.execute(f"SET threads = {count}")
        for name, value in settings.items():
            con.execute(f"SET {name} = {value}")
        return con

    connection.connect = connect


# ---- parent side ---------------------------------------------------------------------------------------


def run_step(step: str, path: Path, timeout: float, pythonpath: str | None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--step", step, str(path)], stdout=out, stderr=subprocess.STDOUT, env=env
        )
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                return {"error": f"killed after {timeout:.0f} s", "peak_rss": usage.ru_maxrss * 1024}
            time.sleep(0.05)
        out.seek(0)
        text = out.read().decode(errors="replace")
    results = [line[7:] for line in text.splitlines() if line.startswith("RESULT ")]
    if not results:
        last = [line for line in text.strip().splitlines() if line.strip()][-3:]
        return {"error": " | ".join(last) or f"exit status {status}", "peak_rss": usage.ru_maxrss * 1024}
    return {**json.loads(results[-1]), "peak_rss": usage.ru_maxrss * 1024, "load": load}


def best_of(step: str, path: Path, repeat: int, timeout: float, pythonpath: str | None = None) -> dict:
    runs = [run_step(step, path, timeout, pythonpath) for _ in range(repeat)]
    good = [r for r in runs if "error" not in r]
    if not good:
        return runs[-1]
    best = min(good, key=lambda r: r["wall"])
    return {**best, "peak_rss": max(r["peak_rss"] for r in good), "walls": [round(r["wall"], 3) for r in good]}


def versions() -> dict:
    names = ["duckdb", "orjson", "isal", "pandas", "HolisticTraceAnalysis"]
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return {"python": platform.python_version(), "cpus": os.cpu_count(), **found}


def fmt(value, spec=".2f", missing="—"):
    return missing if value is None else format(value, spec)


def print_tables(results: list[dict]) -> None:
    print(
        "\n| JSON MB | file | events | read s | orjson s | orjson peak RSS MB | kernelscope s | CPU s | MB/s of JSON "
        "| peak RSS MB | RSS / JSON | HTA s | HTA peak RSS MB | orjson / ks | HTA / ks | ks (DuckDB reader) s "
        "| DuckDB reader / ks | ks teardown s |"
    )
    print("|" + "---|" * 18)
    for r in results:
        ks, oj, hta, rd, kd = (r.get(step, {}) for step in ("kernelscope", "orjson", "hta", "read", "ks_duckdb"))
        json_mb = r["json_bytes"] / MB
        ok = "wall" in ks
        print(
            f"| {json_mb:.0f} | {r['kind']} | {r['events']:,} | {fmt(rd.get('wall'))} | {fmt(oj.get('wall'))} "
            f"| {fmt(oj.get('peak_rss', 0) / MB, '.0f')} | {fmt(ks.get('wall')) if ok else ks['error']} "
            f"| {fmt(ks.get('cpu'))} | {fmt(json_mb / ks['wall'] if ok else None, '.0f')} "
            f"| {fmt(ks.get('peak_rss', 0) / MB, '.0f')} | {fmt(ks.get('peak_rss', 0) / r['json_bytes'])} "
            f"| {fmt(hta.get('wall')) if 'error' not in hta else hta['error'][:60]} "
            f"| {fmt(hta.get('peak_rss', 0) / MB, '.0f') if hta else '—'} "
            f"| {fmt(oj['wall'] / ks['wall'] if ok and 'wall' in oj else None)} "
            f"| {fmt(hta['wall'] / ks['wall'] if ok and 'wall' in hta else None, '.1f')} "
            f"| {fmt(kd.get('wall'))} | {fmt(kd['wall'] / ks['wall'] if ok and 'wall' in kd else None)} "
            f"| {fmt(ks.get('teardown'))} |"
        )
    print("\nScaling (kernelscope): per 100 MB of JSON, time and peak RSS should stay flat if growth is linear.")
    print("| file | JSON MB | s per 100 MB | CPU s per 100 MB | peak RSS MB | (peak RSS − baseline) / JSON |")
    print("|---|---|---|---|---|---|")
    for r in sorted(results, key=lambda r: (r["kind"], r["json_bytes"])):
        ks = r.get("kernelscope", {})
        if "wall" not in ks:
            continue
        per = 100 * MB / r["json_bytes"]
        print(
            f"| {r['kind']} | {r['json_bytes'] / MB:.0f} | {ks['wall'] * per:.2f} | {ks['cpu'] * per:.2f} "
            f"| {ks['peak_rss'] / MB:.0f} | {(ks['peak_rss'] - ks['baseline_rss']) / r['json_bytes']:.2f} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", nargs=2, metavar=("STEP", "FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--source", default=str(HERE.parent / "sample_traces" / "gpt2"), help="trace to scale")
    parser.add_argument("--sizes", default="10MB,100MB,300MB,1GB", help="JSON sizes, comma-separated")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "kernelscope-bench"))
    parser.add_argument("--steps", default=",".join(STEPS), help="which steps to run")
    parser.add_argument("--kinds", default="json,json.gz", help="file kinds to run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per step (best wall time kept); HTA runs once")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before a step is killed")
    parser.add_argument("--analyzer-path", help="PYTHONPATH for the kernelscope step (e.g. an older checkout)")
    parser.add_argument("--memory-limit", help="load_run's memory_limit for the kernelscope step (e.g. 2GB)")
    parser.add_argument("--out", help="write every measurement to this JSON file")
    args = parser.parse_args(argv)
    if args.step:
        child(*args.step)
        return
    if args.memory_limit:
        os.environ["KS_BENCH_MEMORY_LIMIT"] = args.memory_limit
    steps = args.steps.split(",")
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    scaled = scale_trace.ScaledTrace(scale_trace.load_trace(args.source))
    results = []
    for size_text in args.sizes.split(","):
        size = scale_trace.parse_size(size_text)
        copies = scaled.copies_for(size)
        plain = workdir / f"{Path(args.source).name}-{size_text}.json"
        if not plain.exists() or not Path(f"{plain}.gz").exists():
            scale_trace.write_scaled(args.source, plain, copies=copies, gzip_copy=True)
        events = copies * len(scaled.pass_events) + len(scaled.other_events)
        for kind in args.kinds.split(","):
            path = plain if kind == "json" else Path(f"{plain}.gz")
            entry = {
                "size": size_text,
                "kind": kind,
                "path": str(path),
                "events": events,
                "json_bytes": plain.stat().st_size,
                "file_bytes": path.stat().st_size,
            }
            for step in steps:
                repeat = 1 if step == "hta" else args.repeat
                pythonpath = args.analyzer_path if step == "kernelscope" else None
                entry[step] = best_of(step, path, repeat, args.timeout, pythonpath)
                print(f"{size_text} {kind} {step}: {json.dumps(entry[step])}", flush=True)
            results.append(entry)
    print_tables(results)
    report = {"date": date.today().isoformat(), "machine": platform.node(), "versions": versions(), "results": results}
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
