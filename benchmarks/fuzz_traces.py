"""Fuzz the analyzer with mutations of the real traces and run directories of sample_traces/.

Each case takes one real source (a run directory or a plain Kineto trace), applies one mutation
(truncate, corrupt bytes, drop fields, change types, duplicate / delete / shuffle events, reorder keys,
reformat, break the header, damage the run directory's manifest or sample store, or several at once) and
loads the result with ``load_run``. Every case must end in one of:

  ok      loaded, and no device event was lost: one row per complete kernel/memcpy/memset event
  same    a mutation that keeps the input valid (shuffled events, reordered keys, reformatted JSON) loaded
          to exactly the attribution, summary and launch check of the unmutated source
  error   a KernelscopeError (docs/errors.md): one sentence naming the file

Anything else fails: another exception (``crash``), a lost row (``dropped``), a changed attribution of a
valid input (``changed``), a valid input refused (``refused``), a case over the timeout (``hang``), a
worker that died. Cases run in worker processes, each with a wall-clock limit per case.

Usage: python benchmarks/fuzz_traces.py [--cases 10000] [--jobs 2] [--seed 0] [--timeout 60] [--out FILE]
    [--sources NAME ...] [--kinds KIND ...]
    python benchmarks/fuzz_traces.py --cases 6000 --seed 9 2> benchmarks/results/fuzz_traces_<machine>_<date>.txt

Prints to stderr a progress line every 500 cases and each failure as it happens (its case number, mutation,
source and steps, enough to replay it from the seed); at the end, to stdout, the totals (cases, seed, time, the
slowest case, failures), a markdown table of outcomes per mutation and the 25 most frequent error messages.
Exits 1 if any case failed. --out writes every case's outcome as JSON lines.
The mutations are in trace_mutations.py; tests/test_fuzz.py runs them, fewer, under hypothesis.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import multiprocessing as mp
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from multiprocessing.connection import wait
from pathlib import Path

import pandas as pd
from trace_mutations import DEVICE_CATS, KINDS, Case, Source, make_case, sources  # noqa: E402

PASSING = {"ok", "same", "error"}


def baseline(source: Source, as_run_dir: bool) -> tuple:
    """The fingerprint of the unmutated source, loaded as a run directory or as its bare trace."""
    from kernelscope.analyzer import load_run

    with load_run(source.run_dir if as_run_dir else source.trace, **source.load_kwargs) as run:
        return fingerprint(run)


def fingerprint(run) -> tuple:
    """The attribution, summary and launch check of a loaded run, independent of event order and ids."""
    frame = run.profiling_df().drop(columns=["event_id", "call_event_id"])
    # a device event that no key links has a correlation made from its place in the trace, as an event id is
    frame["correlation"] = frame["correlation"].mask(frame["correlation"] < 0)
    rows = sorted(repr(tuple(None if _missing(v) else _round(v) for v in row)) for row in frame.itertuples(index=False))
    summary = run.describe(top_k=10**9).sort_values("function_name")
    table = [repr(tuple(None if _missing(v) else _round(v) for v in row)) for row in summary.itertuples(index=False)]
    return rows, table, tuple(run.launch_check().__dict__.values())


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _round(value):
    return round(value, 6) if isinstance(value, float) else value


def _device_events(path: Path) -> int | None:
    """Complete device events in the mutated input, as Python's json reads it; None when it cannot."""
    trace = path / "trace.json.gz" if path.is_dir() else path
    try:
        data = trace.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        doc = json.loads(data)
    except (OSError, EOFError, ValueError, RecursionError):
        return None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        return None
    return sum(1 for e in events if isinstance(e, dict) and e.get("ph") == "X" and is_device(e.get("cat")))


def is_device(cat) -> bool:
    return isinstance(cat, str) and cat in DEVICE_CATS


def run_case(case: Case, expected: tuple | None) -> tuple[str, str]:
    """(outcome, detail) of loading one case; outcomes outside PASSING are failures."""
    from kernelscope.analyzer import KernelscopeError, load_run

    try:
        with load_run(case.path, **case.source.load_kwargs) as run:
            run.function_data()
            got = fingerprint(run)
            rows = len(run.profiling_df())
    except KernelscopeError as exc:
        if case.valid:
            return "refused", str(exc)
        held = _device_events(case.path) if exc.problem.startswith("holds no device events") else 0
        if held:
            return "dropped", f"{exc}, but it holds {held}"
        return "error", _category(exc.problem)
    except Exception:  # the fuzzer's whole point: anything else is a bug
        return "crash", traceback.format_exc(limit=6)
    if case.valid:
        return ("same", "") if got == expected else ("changed", "attribution differs from the unmutated source")
    expected = _device_events(case.path)
    if expected is None:
        return "ok", "accepted input that Python's json rejects"
    if expected and rows != expected:
        return "dropped", f"{rows} rows for {expected} device events"
    return "ok", ""


def _category(problem: str) -> str:
    """The message with its numbers, quoted values and names blanked, to count kinds of errors."""
    text = re.sub(r"\s*\([^()]*\)$", "", problem)
    text = re.sub(r"'[^']*'|\"[^\"]*\"|\[[^\]]*\]|-?\d[\d.e+]*", "_", text)
    return text.strip()[:90]


def _worker(conn, seed: int, names: list[str] | None, kinds: list[str] | None, scratch: str) -> None:
    """Receive case numbers, answer (number, kind, source, steps, outcome, detail, seconds)."""

    all_sources = sources(names)
    weights = {kind: weight for kind, weight in KINDS.items() if kinds is None or kind in kinds}
    baselines = {}
    while True:
        number = conn.recv()
        if number is None:
            return
        rng = random.Random(f"{seed}:{number}")
        source = rng.choice(all_sources)
        kind = rng.choices(list(weights), weights=list(weights.values()))[0]
        workdir = Path(scratch) / str(number)
        workdir.mkdir()
        start = time.perf_counter()
        try:
            case = make_case(source, kind, rng, workdir)
            if case.valid and (source.name, case.path.is_dir()) not in baselines:
                baselines[source.name, case.path.is_dir()] = baseline(source, case.path.is_dir())
            outcome, detail = run_case(case, baselines.get((source.name, case.path.is_dir())))
            steps = case.steps
        except Exception:
            outcome, detail, steps = "fuzzer bug", traceback.format_exc(limit=4), []
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        conn.send((number, kind, source.name, steps, outcome, detail, time.perf_counter() - start))


class Pool:
    """Worker processes with a wall-clock limit per case: a worker past it is killed and replaced."""

    def __init__(self, jobs: int, seed: int, names: list[str] | None, kinds: list[str] | None = None):
        self.ctx = mp.get_context("spawn")
        self.seed, self.names, self.kinds = seed, names, kinds
        self.scratch = tempfile.mkdtemp(prefix="kernelscope-fuzz-")  # removed by close(), also after a kill
        self.workers = [self._start() for _ in range(jobs)]

    def _start(self):
        parent, child = self.ctx.Pipe()
        args = (child, self.seed, self.names, self.kinds, self.scratch)
        process = self.ctx.Process(target=_worker, args=args, daemon=True)
        process.start()
        return process, parent

    def run(self, numbers, timeout: float, on_result) -> None:
        todo = list(numbers)[::-1]
        busy = {}  # index of worker -> (case number, start time)
        while todo or busy:
            for w, (_process, conn) in enumerate(self.workers):
                if w not in busy and todo:
                    number = todo.pop()
                    conn.send(number)
                    busy[w] = (number, time.monotonic())
            ready = wait([self.workers[w][1] for w in busy], timeout=1.0)
            for w in list(busy):
                process, conn = self.workers[w]
                number, started = busy[w]
                if conn in ready:
                    try:
                        on_result(conn.recv())
                    except EOFError:
                        on_result((number, "?", "?", [], "died", f"worker exit code {process.exitcode}", 0.0))
                        self.workers[w] = self._start()
                    del busy[w]
                elif time.monotonic() - started > timeout:
                    process.kill()
                    process.join()
                    on_result((number, "?", "?", [], "hang", f"over {timeout} s", timeout))
                    self.workers[w] = self._start()
                    del busy[w]

    def close(self) -> None:
        for process, conn in self.workers:
            conn.send(None)
            process.join(10)
        shutil.rmtree(self.scratch, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    parser.add_argument("--sources", nargs="*", default=None, help="source names (default: all)")
    parser.add_argument("--kinds", nargs="*", choices=sorted(KINDS), default=None, help="mutations (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="write every case's outcome here (JSON lines)")
    args = parser.parse_args()

    counts: Counter = Counter()
    errors: Counter = Counter()
    failures = []
    slowest = [0.0, None]
    out = open(args.out, "w") if args.out else None
    started = time.monotonic()

    def on_result(result):
        number, kind, source, steps, outcome, detail, seconds = result
        counts[(kind, outcome)] += 1
        if outcome == "error":
            errors[detail] += 1
        if outcome not in PASSING:
            failures.append(result)
            print(f"FAIL case {number} {kind} {source} {steps}: {outcome}\n{detail}", file=sys.stderr)
        if seconds > slowest[0]:
            slowest[:] = [seconds, number]
        if out:
            out.write(
                json.dumps(
                    dict(zip(["case", "kind", "source", "steps", "outcome", "detail", "s"], result, strict=True))
                )
                + "\n"
            )
        done = sum(counts.values())
        if done % 500 == 0:
            print(f"{done} cases, {len(failures)} failures, {time.monotonic() - started:.0f} s", file=sys.stderr)

    pool = Pool(args.jobs, args.seed, args.sources, args.kinds)
    try:
        pool.run(range(args.cases), args.timeout, on_result)
    finally:
        pool.close()
        if out:
            out.close()
    elapsed = time.monotonic() - started
    outcomes = sorted({o for _, o in counts})
    print(
        f"\n{sum(counts.values())} cases, seed {args.seed}, {args.jobs} jobs, {elapsed:.0f} s, "
        f"timeout {args.timeout:g} s per case, slowest case {slowest[0]:.2f} s (#{slowest[1]}); "
        f"failures: {len(failures)}\n"
    )
    print("| mutation | " + " | ".join(outcomes) + " | cases |")
    print("|---|" + "---|" * (len(outcomes) + 1))
    for kind in KINDS:
        row = [counts[(kind, o)] for o in outcomes]
        print(f"| {kind} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    print("\nmost frequent errors:")
    for message, n in errors.most_common(25):
        print(f"  {n:6d}  {message}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
