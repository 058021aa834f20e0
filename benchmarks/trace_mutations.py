"""Mutations of the real traces and run directories of sample_traces/ (external/ too), for fuzzing the analyzer.

``make_case(source, kind, rng, workdir)`` writes one mutated input; every random choice comes from
``rng``, so a case is reproduced from its seed. Used by benchmarks/fuzz_traces.py and tests/test_fuzz.py.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from trace_framing import blanks, producer_bytes

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
    "begin_end": 6,
    "blanks": 4,
    "combo": 7,
    "run_dir": 7,
    "producer": 8,
}
# the input stays valid: attribution must not change
VALID_KINDS = {"shuffle", "shuffle_keys", "reformat", "begin_end", "blanks", "producer"}


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
    for trace in sorted((REPO / "sample_traces" / "external").glob("*.json*")):  # other projects' (README there)
        found.append((f"external/{trace.name.split('.json')[0]}", trace, None, {}))
    read = {".json": Path.read_bytes, ".gz": lambda path: gzip.decompress(path.read_bytes())}
    return [
        Source(name, trace, run_dir, json.loads(read[trace.suffix](trace)), kwargs)
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


def _picked_events(doc: dict, rng: random.Random):
    """(index, event) of one to three events to damage (elements that are not objects are skipped)."""
    events = _events(doc)
    for i in _pick_events(events, rng, rng.randint(1, 3)):
        if isinstance(events[i], dict):
            yield i, events[i]


def drop_field(doc: dict, rng: random.Random) -> str:
    notes = []
    for i, event in _picked_events(doc, rng):
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
    notes = []
    for i, event in _picked_events(doc, rng):
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


def begin_end(doc: dict, rng: random.Random) -> str:
    """Write a share of the complete spans as "B"/"E" pairs, after the other events, in order of time: the input stays
    valid. Where a span ends at the time the next begins, the file writes the ends first (the order Chrome pairs back
    into the same spans: per thread an "E" ends the latest open "B") or, as a writer sorting by time and then phase
    does, the begins first. A thread whose chosen spans overlap without nesting keeps them complete, as pairs cannot
    say that. A span equal to one left complete (same thread, start and end) stays complete too: which of two equal
    spans holds the other is the file's order, which moving one of them after the other events would change."""
    share = rng.choice([1.0, rng.uniform(0.05, 0.9)])
    begins_first = rng.random() < 0.5
    events = _events(doc)
    chosen: dict[tuple, list[tuple[int, int, int]]] = {}  # thread -> (start ns, end ns, index)
    left: set[tuple] = set()  # (thread, start ns, end ns) of the spans left complete
    for i, e in enumerate(events):
        if (
            isinstance(e, dict) and e.get("ph") == "X"
            and all(type(e.get(k)) in (int, float) for k in ("ts", "dur")) and e["dur"] > 0
            and all(type(e.get(k)) in (int, str) for k in ("pid", "tid"))
        ):  # fmt: skip
            start = round(e["ts"] * 1000)
            span = (start, start + round(e["dur"] * 1000), i)
            if rng.random() < share:
                chosen.setdefault((e["pid"], e["tid"]), []).append(span)
            else:
                left.add(((e["pid"], e["tid"]), *span[:2]))
    paired, marks = set(), []
    for thread, spans in chosen.items():
        spans = [span for span in spans if (thread, *span[:2]) not in left]
        spans.sort(key=lambda span: (span[0], -span[1], span[2]))  # outer first; equal spans in the trace's order
        if not _nested(spans):
            continue
        for order, (start, end, i) in enumerate(spans):
            paired.add(i)
            marks.append((start, 1 - begins_first, order, i, "B"))
            marks.append((end, begins_first, -order, i, "E"))  # at one time the innermost end first
    written = []
    for ns, _, _, i, ph in sorted(marks):
        e = events[i]
        if ph == "B":
            written.append({**{k: v for k, v in e.items() if k != "dur"}, "ph": "B"})
        else:
            written.append({"ph": "E", "name": e.get("name"), "pid": e["pid"], "tid": e["tid"], "ts": ns / 1000})
    events[:] = [e for i, e in enumerate(events) if i not in paired] + written
    return f"{len(paired)} spans as B/E pairs{', begins first at one time' if begins_first else ''}"


def _nested(spans: list[tuple[int, int, int]]) -> bool:
    """Whether ``spans`` (start, end, index), outer first, nest: none ends past the end of one still open."""
    open_ends: list[int] = []
    for start, end, _ in spans:
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        if open_ends and end > open_ends[-1]:
            return False
        open_ends.append(end)
    return True


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
    "begin_end": begin_end,
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
        path.write_bytes(gzip.compress(data, compresslevel=1, mtime=0))
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
        packed = gzip.compress(data, compresslevel=1, mtime=0)
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
    if kind == "blanks":
        return _blanks_case(source, doc, rng, stem)
    if kind == "producer":  # as another writer of the format writes the same trace (trace_framing.py)
        data, step = producer_bytes(doc, rng)
        return Case(kind, source, _write_trace(data, stem, rng), True, [step])
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


def _blanks_case(source: Source, doc: dict, rng: random.Random, stem: Path) -> Case:
    """Whitespace before the JSON, whitespace and zeros after it (and after a gzip member): the trace as it was."""
    before, after = blanks(rng, b" \t\r\n"), blanks(rng, b" \t\r\n\0")
    path = _write_trace(before + _dumps(doc, pretty=rng.random() < 0.5) + after, stem, rng)
    outside = blanks(rng, b" \t\r\n\0") if path.suffix == ".gz" else b""
    with open(path, "ab") as out:
        out.write(outside)
    step = f"{len(before)} blanks before, {len(after)} after, {len(outside)} after the gzip member"
    return Case("blanks", source, path, True, [step])


def _json_paths(value, prefix=()):
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield from _json_paths(item, (*prefix, key))


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
        (run / "trace.json.gz").write_bytes(gzip.compress(_dumps(doc), compresslevel=1, mtime=0))
        return Case("run_dir", source, run, True, [step])
    else:
        step = MUTATORS[rng.choice(["drop_field", "change_type", "duplicate"])](doc, rng)
        (run / "trace.json.gz").write_bytes(gzip.compress(_dumps(doc), compresslevel=1, mtime=0))
    return Case("run_dir", source, run, False, [step])
