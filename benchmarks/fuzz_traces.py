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
tests/test_fuzz.py runs the same mutations, fewer, under hypothesis.
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
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
PROBE_PREFIXES = {"module_prefix": "probe:", "function_prefix": "nofn:"}  # the plain traces' scopes
ILL_TYPED = [
    "abc",
    "12.5",
    "",
    None,
    True,
    False,
    [],
    [1, 2],
    {},
    {"a": 1},
    -1,
    -1.5,
    0,
    1e30,
    -1e30,
    2**63,
    2**64 + 1,
    1.0000001,
    "NaN",
    float("nan"),
    float("inf"),
]
EVENT_FIELDS = ["ts", "dur", "ph", "cat", "name", "pid", "tid", "args"]
ARG_FIELDS = ["correlation", "External id", "device", "stream"]
KINDS = {  # mutation: weight
    "truncate": 12,
    "corrupt_bytes": 9,
    "drop_field": 14,
    "change_type": 16,
    "duplicate": 7,
    "delete_events": 6,
    "header": 6,
    "shuffle": 8,
    "shuffle_keys": 5,
    "reformat": 3,
    "combo": 7,
    "run_dir": 7,
}
VALID_KINDS = {"shuffle", "shuffle_keys", "reformat"}  # the input stays valid: attribution must not change
PASSING = {"ok", "same", "error"}


@dataclass
class Source:
    """One real input: its parsed trace, its run directory (or None) and how to load it."""

    name: str
    trace: Path
    run_dir: Path | None
    doc: dict
    load_kwargs: dict = field(default_factory=dict)


def sources(names: list[str] | None = None) -> list[Source]:
    """The run directories and plain Kineto traces of sample_traces/ (or those named)."""
    found = []
    for manifest in sorted((REPO / "sample_traces").glob("*/manifest.json")):
        found.append((manifest.parent.name, manifest.parent / "trace.json.gz", manifest.parent, {}))
    for trace in sorted((REPO / "sample_traces" / "plain_kineto").glob("*.json.gz")):
        found.append((f"plain/{trace.name.removesuffix('.json.gz')}", trace, None, PROBE_PREFIXES))
    return [
        Source(name, trace, run_dir, json.loads(gzip.decompress(trace.read_bytes())), kwargs)
        for name, trace, run_dir, kwargs in found
        if names is None or name in names
    ]


@dataclass
class Case:
    """A mutated input written to disk: ``path`` is what load_run reads."""

    kind: str
    source: Source
    path: Path
    valid: bool  # the mutation keeps the input valid, so the attribution must equal the source's
    steps: list[str] = field(default_factory=list)


def _events(doc: dict) -> list:
    return doc["traceEvents"]


def _pick_events(events: list, rng: random.Random, count: int) -> list[int]:
    """Indices of events, most from the ones the attribution reads (X events of device, launch, op)."""
    interesting = [
        i
        for i, e in enumerate(events)
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") not in (None, "Trace", "overhead")
    ]
    pool = interesting if interesting and rng.random() < 0.85 else list(range(len(events)))
    return [rng.choice(pool) for _ in range(count)] if pool else []


def drop_field(doc: dict, rng: random.Random) -> str:
    events = _events(doc)
    notes = []
    for i in _pick_events(events, rng, rng.randint(1, 3)):
        event = events[i]
        if not isinstance(event, dict):
            continue
        args = event.get("args")
        if isinstance(args, dict) and args and rng.random() < 0.4:
            key = rng.choice([k for k in ARG_FIELDS if k in args] or list(args))
            args.pop(key)
            notes.append(f"{i}.args.{key}")
        elif event:
            key = rng.choice([k for k in EVENT_FIELDS if k in event] or list(event))
            event.pop(key)
            notes.append(f"{i}.{key}")
    return "drop " + ",".join(notes)


def change_type(doc: dict, rng: random.Random) -> str:
    events = _events(doc)
    notes = []
    for i in _pick_events(events, rng, rng.randint(1, 3)):
        event = events[i]
        if not isinstance(event, dict):
            continue
        value = rng.choice(ILL_TYPED)
        if rng.random() < 0.35 and isinstance(event.get("args"), dict):
            key = rng.choice(ARG_FIELDS)
            event["args"][key] = value
            notes.append(f"{i}.args.{key}={value!r}")
        else:
            key = rng.choice(EVENT_FIELDS)
            event[key] = value
            notes.append(f"{i}.{key}={value!r}")
    return "retype " + ",".join(notes)


def duplicate(doc: dict, rng: random.Random) -> str:
    events = _events(doc)
    picked = _pick_events(events, rng, rng.randint(1, 5))
    for i in picked:
        events.insert(rng.randrange(len(events) + 1), json.loads(json.dumps(events[i])))
    return f"duplicate {picked}"


def delete_events(doc: dict, rng: random.Random) -> str:
    events = _events(doc)
    share = rng.uniform(0.001, 0.1)
    kept = [e for e in events if rng.random() >= share]
    removed = len(events) - len(kept)
    events[:] = kept
    return f"delete {removed}"


def shuffle(doc: dict, rng: random.Random) -> str:
    rng.shuffle(_events(doc))
    return "shuffle"


def shuffle_keys(doc: dict, rng: random.Random) -> str:
    """Reorder the keys of every event and args, and of the trace object (traceEvents first, last, between)."""

    def reorder(value):
        if isinstance(value, dict):
            items = list(value.items())
            rng.shuffle(items)
            return {k: reorder(v) for k, v in items}
        return value

    events = [reorder(e) for e in _events(doc)]
    keys = [k for k in doc if k != "traceEvents"]
    rng.shuffle(keys)
    position = rng.randint(0, len(keys))
    header = {k: doc[k] for k in keys}
    doc.clear()
    for k in keys[:position]:
        doc[k] = header[k]
    doc["traceEvents"] = events
    for k in keys[position:]:
        doc[k] = header[k]
    return f"shuffle keys (traceEvents at {position} of {len(keys)})"


def header(doc: dict, rng: random.Random) -> str:
    """Damage the trace object around the events: a missing or ill-typed traceEvents, odd header keys."""
    choice = rng.randrange(4)
    if choice == 0:
        doc.pop("traceEvents")
        return "no traceEvents"
    if choice == 1:
        doc["traceEvents"] = rng.choice(ILL_TYPED[:-2])
        return f"traceEvents={doc['traceEvents']!r}"
    key = rng.choice([k for k in doc if k != "traceEvents"] or ["traceName"])
    if choice == 2:
        doc[key] = rng.choice(ILL_TYPED[:-2])
        return f"header {key}={doc[key]!r}"
    doc[key] = {"traceEvents": [{"ph": "X"}], "noise": "]" * rng.randint(1, 5000)}
    return f"header {key} holds a decoy traceEvents"


MUTATORS = {
    "drop_field": drop_field,
    "change_type": change_type,
    "duplicate": duplicate,
    "delete_events": delete_events,
    "shuffle": shuffle,
    "shuffle_keys": shuffle_keys,
    "header": header,
}


def _dumps(doc: dict, pretty: bool = False) -> bytes:
    return json.dumps(doc, indent=2 if pretty else None, separators=None if pretty else (",", ":")).encode()


def _write_trace(data: bytes, path_stem: Path, rng: random.Random) -> Path:
    if rng.random() < 0.5:
        path = path_stem.with_suffix(".json.gz")
        path.write_bytes(gzip.compress(data, compresslevel=1))
    else:
        path = path_stem.with_suffix(".json")
        path.write_bytes(data)
    return path


def make_case(source: Source, kind: str, rng: random.Random, workdir: Path) -> Case:
    """Write the mutated input for one case into ``workdir`` (a fresh directory)."""
    doc = json.loads(json.dumps(source.doc))
    stem = workdir / "trace"
    if kind == "truncate":
        data = _dumps(doc)
        if rng.random() < 0.5:
            cut = rng.randrange(len(data))
            return Case(kind, source, _write_trace(data[:cut], stem, rng), False, [f"cut JSON at {cut}/{len(data)}"])
        packed = gzip.compress(data, compresslevel=1)
        cut = rng.randrange(len(packed))
        path = stem.with_suffix(".json.gz")
        path.write_bytes(packed[:cut])
        return Case(kind, source, path, False, [f"cut gzip at {cut}/{len(packed)}"])
    if kind == "corrupt_bytes":
        data = bytearray(_dumps(doc))
        spots = [rng.randrange(len(data)) for _ in range(rng.randint(1, 8))]
        for spot in spots:
            data[spot] = rng.randrange(256)
        return Case(kind, source, _write_trace(bytes(data), stem, rng), False, [f"bytes at {spots}"])
    if kind == "reformat":
        return Case(kind, source, _write_trace(_dumps(doc, pretty=True), stem, rng), True, ["indent 2"])
    if kind == "run_dir":
        return _run_dir_case(source, doc, rng, workdir)
    if kind == "combo":
        steps = [
            MUTATORS[name](doc, rng)
            for name in rng.sample(["drop_field", "change_type", "duplicate", "delete_events", "shuffle"], 2)
        ]
        return Case(kind, source, _write_trace(_dumps(doc), stem, rng), False, steps)
    step = MUTATORS[kind](doc, rng)
    return Case(kind, source, _write_trace(_dumps(doc), stem, rng), kind in VALID_KINDS, [step])


def _json_paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _json_paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _json_paths(v, (*prefix, i))


def _damage_json(path: Path, rng: random.Random) -> str:
    doc = json.loads(path.read_text())
    target = rng.choice([p for p in _json_paths(doc) if p])
    parent = doc
    for key in target[:-1]:
        parent = parent[key]
    if rng.random() < 0.5:
        parent.pop(target[-1])
        what = "drop"
    else:
        parent[target[-1]] = rng.choice(ILL_TYPED)
        what = f"= {parent[target[-1]]!r}"
    path.write_text(json.dumps(doc))
    return f"{path.name}:{'/'.join(map(str, target))} {what}"


def _run_dir_case(source: Source, doc: dict, rng: random.Random, workdir: Path) -> Case:
    """A damaged copy of a run directory (a plain source gets a trace mutation instead)."""
    if source.run_dir is None:
        return make_case(source, rng.choice(["drop_field", "change_type", "shuffle"]), rng, workdir)
    run = workdir / "run"
    shutil.copytree(source.run_dir, run, ignore=shutil.ignore_patterns("samples.pt"))
    choice = rng.randrange(5)
    if choice == 0:
        step = _damage_json(run / "manifest.json", rng)
    elif choice == 1:
        step = _damage_json(run / "samples.json", rng)
    elif choice == 2:
        name = rng.choice(["manifest.json", "samples.json", "trace.json.gz"])
        (run / name).unlink()
        step = f"remove {name}"
    elif choice == 3:  # shuffled trace inside an intact run directory: valid
        step = shuffle(doc, rng)
        (run / "trace.json.gz").write_bytes(gzip.compress(_dumps(doc), compresslevel=1))
        return Case("run_dir", source, run, True, [step])
    else:
        step = MUTATORS[rng.choice(["drop_field", "change_type", "duplicate"])](doc, rng)
        (run / "trace.json.gz").write_bytes(gzip.compress(_dumps(doc), compresslevel=1))
    return Case("run_dir", source, run, False, [step])


def baseline(source: Source, as_run_dir: bool) -> tuple:
    """The fingerprint of the unmutated source, loaded as a run directory or as its bare trace."""
    from kernelscope.analyzer import load_run

    with load_run(source.run_dir if as_run_dir else source.trace, **source.load_kwargs) as run:
        return fingerprint(run)


def fingerprint(run) -> tuple:
    """The attribution, summary and launch check of a loaded run, independent of event order and ids."""
    frame = run.profiling_df().drop(columns=["event_id"])
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
        if exc.problem.startswith("holds no device events") and _device_events(case.path):
            return "dropped", f"{exc}, but it holds {_device_events(case.path)}"
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


def _worker(conn, seed: int, names: list[str] | None, scratch: str) -> None:
    """Receive case numbers, answer (number, kind, source, steps, outcome, detail, seconds)."""

    all_sources = sources(names)
    baselines = {}
    while True:
        number = conn.recv()
        if number is None:
            return
        rng = random.Random(f"{seed}:{number}")
        source = rng.choice(all_sources)
        kind = rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
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

    def __init__(self, jobs: int, seed: int, names: list[str] | None):
        self.ctx = mp.get_context("spawn")
        self.seed, self.names = seed, names
        self.scratch = tempfile.mkdtemp(prefix="kernelscope-fuzz-")  # removed by close(), also after a kill
        self.workers = [self._start() for _ in range(jobs)]

    def _start(self):
        parent, child = self.ctx.Pipe()
        args = (child, self.seed, self.names, self.scratch)
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

    pool = Pool(args.jobs, args.seed, args.sources)
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
