"""Valid rewritings of a real trace, in the shapes other writers of the Chrome trace format give the same events.

Each returns the bytes of the rewritten trace and what it did; the attribution must not change (trace_mutations.py
makes them cases of the kinds "blanks" and "producer"). What each producer writes, and where that is known from:

- the JSON Array Format: a bare array of events, whose closing "]" may be left off, after a trailing comma too (the
  Trace Event Format document: "the ] at the end is optional", for writers cut off mid-run); torch_npu's trace_view;
- a UTF-8 byte order mark first (an editor's), CRLF line ends (a Windows writer's or editor's);
- ``displayTimeUnit`` "ns", which changes the viewer's display, never the unit of ``ts`` (Kineto's PR 1074);
- pid and tid written as the text of their integers (torch 1.8's CPU threads, torch_npu's), on some events or all;
- ``correlation`` and ``External id`` as text (hand-merged traces; torch_npu writes its numbers as text);
- ``ts`` in absolute epoch microseconds, written exactly (HolisticTraceAnalysis' test traces, torch 1.8-2.0);
- events of the phases the attribution does not read, among the others: instant "i" / "I" (Chrome's old name), async
  "b" / "e" / "n", counter "C", flow step "t", metadata "M"; at times of the trace, on its threads.
"""

from __future__ import annotations

import json
import random
import re
from decimal import Decimal

EPOCH_US = Decimal("1700000000000000.000")  # 2023-11, in µs: 16 digits before the point, as epoch traces have
# how each option of producer_bytes rewrites the trace, drawn independently
THREAD_TEXT, KEY_TEXT, NS_UNIT, EPOCH, PHASES = "pid/tid as text", "keys as text", "unit ns", "epoch ts", "phases"
FRAMES = ["object", "array", "array without ]", "array without ], after a comma"]


def blanks(rng: random.Random, alphabet: bytes) -> bytes:
    """A run of blanks from ``alphabet``, a short random pattern repeated: none, a few, or more than the 1 MiB the end
    of a trace is searched in."""
    size = rng.choice([0, 1, 3, 1000, (1 << 20) + 1, 3 << 20])
    pattern = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))
    return (pattern * (size // len(pattern) + 1))[:size]


def producer_bytes(doc: dict, rng: random.Random) -> tuple[bytes, str]:
    """The trace ``doc`` (modified in place) as a random choice of the writers above would write it."""
    steps = [option for option in (THREAD_TEXT, KEY_TEXT, NS_UNIT, EPOCH, PHASES) if rng.random() < 0.4]
    events = doc["traceEvents"]
    if THREAD_TEXT in steps:
        share = rng.choice([1.0, 0.5])
        for e in events:
            for key in ("pid", "tid"):
                if isinstance(e, dict) and type(e.get(key)) is int and rng.random() < share:
                    e[key] = str(e[key])
    if KEY_TEXT in steps:
        for e in events:
            args = e.get("args") if isinstance(e, dict) else None
            for key in ("correlation", "External id"):
                if isinstance(args, dict) and type(args.get(key)) is int:
                    args[key] = str(args[key])
    if NS_UNIT in steps:
        doc["displayTimeUnit"] = "ns"
    if PHASES in steps:
        _other_phases(events, rng)
    frame = rng.choice(FRAMES)
    steps.append(frame)
    text = _text(doc if frame == "object" else events, EPOCH in steps)
    if frame != "object":
        text = text.rstrip().removesuffix("]") if frame != "array" else text
        text += ",\n" if frame.endswith("comma") else ""
    if rng.random() < 0.3:
        text, steps = "\ufeff" + text, [*steps, "BOM"]
    if rng.random() < 0.3:
        text, steps = text.replace("\n", "\r\n"), [*steps, "CRLF"]
    return text.encode(), ", ".join(steps)


def _text(value, epoch: bool) -> str:
    """JSON of ``value``, one event a line; with ``epoch`` every numeric ts moved by EPOCH_US, written exactly (the
    decimal of the float as Python prints it, plus the offset)."""
    if epoch:
        value = json.loads(json.dumps(value), parse_float=Decimal)
        for e in value["traceEvents"] if isinstance(value, dict) else value:
            if isinstance(e, dict) and type(e.get("ts")) in (int, Decimal):
                e["ts"] = EPOCH_US + e["ts"]

    def dumps(v) -> str:
        return re.sub(r'"@(-?[0-9.Ee+-]+)@"', r"\1", json.dumps(v, default=lambda d: f"@{d}@"))

    if isinstance(value, list):
        return "[\n" + ",\n".join(dumps(e) for e in value) + "\n]"
    events = value["traceEvents"]
    header = dumps({k: v for k, v in value.items() if k != "traceEvents"})
    body = '"traceEvents": [\n' + ",\n".join(dumps(e) for e in events) + "\n]"
    return "{" + body + ("" if header == "{}" else ", " + header[1:-1]) + "}"


def _other_phases(events: list, rng: random.Random) -> None:
    """Events of phases the attribution does not read, on the trace's threads at its events' times (so its start and
    end stay), with flow and async ids no flow of the trace has."""
    spans = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and type(e.get("ts")) in (int, float)]
    for n in range(min(len(spans), rng.randint(1, 40))):
        e = rng.choice(spans)
        where = {"pid": e.get("pid"), "tid": e.get("tid"), "ts": e["ts"]}
        flow = 10**15 + n
        added = rng.choice(
            [
                [{"ph": "i", "s": "t", "name": "mark", "cat": "mark", **where}],
                [{"ph": "I", "name": "mark", **where}],
                [{"ph": "n", "name": "step", "cat": "async", "id": flow, **where}],
                [{"ph": "b", "name": "step", "cat": "async", "id": flow, **where},
                 {"ph": "e", "name": "step", "cat": "async", "id": flow, **where}],
                [{"ph": "C", "name": "queue", "pid": e.get("pid"), "ts": e["ts"], "args": {"depth": n}}],
                [{"ph": "t", "name": "hop", "cat": "hop", "id": flow, "bp": "e", **where}],
                [{"ph": "M", "name": "thread_sort_index", **where, "args": {"sort_index": n}}],
            ]
        )  # fmt: skip
        for event in added:
            events.insert(rng.randrange(len(events) + 1), event)
