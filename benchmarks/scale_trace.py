"""Scale a real Kineto trace up to a target size, keeping its structure, for the analyzer benchmarks.

The recorded pass (every complete event and flow arrow) is repeated N times, each copy shifted in time
past the end of the previous one and given fresh correlation ids (the flow arrows' ``id`` too), External
ids, ``Ev Idx`` and Python ids, so nesting, threads, launch → kernel links and CUDA graph replays stay
valid in every copy. Metadata events are written once; the profiler's span and the events after the pass
move to the end. Timestamps are handled as integer nanoseconds and printed with 3 decimals, as Kineto
does, in Kineto's own layout (so bytes per event match a real trace). The output is streamed one copy at
a time; a 1 GB trace never exists as Python objects.

    python benchmarks/scale_trace.py sample_traces/gpt2 /tmp/gpt2-1g.json --size 1GB --gzip

Prints one JSON line: the path written, the copies, the events and the bytes of the .json (and of the .gz with --gzip).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import sys
from decimal import Decimal
from pathlib import Path

import orjson

GAP_NS = 1_000_000  # 1 ms of idle time between two copies of the pass
GZIP_LEVEL = 3  # zlib's; about the size of the recorder's (recorder/trace_export.py: isal's level 2)
MEMBERS_LEVEL = 2  # isal's, as the recorder writes (--members)
UNITS = {"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "B": 1}
# id spaces renumbered per copy: (where the value sits, which space it belongs to)
ID_FIELDS = {
    ("args", "correlation"): "correlation",
    ("top", "id"): "correlation",  # ac2g flow arrows carry the launch's correlation as their id
    ("args", "External id"): "external",
    ("args", "Ev Idx"): "ev_idx",
    ("args", "Python id"): "python",
    ("args", "Python parent id"): "python",
}
SPACES = ("correlation", "external", "ev_idx", "python")


def load_trace(path: str | os.PathLike) -> dict:
    """The trace at ``path`` (a run directory, ``.json`` or ``.json.gz``), numbers exact (Decimal)."""
    path = Path(path)
    if path.is_dir():
        path = path / "trace.json.gz"
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw, parse_float=Decimal)


def _ns(value) -> int:
    return int(Decimal(value) * 1000)


def _micros(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _json(value) -> str:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_json(k)}: {_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json(v) for v in value) + "]"
    return orjson.dumps(value).decode()


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _is_repeated(event: dict) -> bool:
    return event.get("ph") in ("X", "s", "f") and event.get("cat") != "Trace" and "ts" in event


class _Template:
    """One event of the pass as a ``str.format`` template: {0} ts, {1}..{4} the ids of SPACES."""

    def __init__(self, event: dict, base_ts: int):
        self.ts = _ns(event["ts"]) - base_ts
        self.ids = [0] * len(SPACES)
        first, timing, args = [], [], []
        for key, value in event.items():
            if key == "ts":
                timing.append('"ts": {0}')
            elif key == "dur":
                timing.append(f'"dur": {_escape(_micros(_ns(value)))}')
            elif key == "args":
                continue
            else:
                first.append(self._field("top", key, value))
        for key, value in (event.get("args") or {}).items():
            args.append(self._field("args", key, value))
        if args:
            body = [", ".join(first) + ",", ", ".join(timing) + ",", '"args": {{', "  " + ", ".join(args), "}}"]
        else:
            body = [", ".join(first + timing)]
        lines = ["  {{", *("    " + line for line in body), "  }}"]
        self.text = "\n".join(lines)

    def _field(self, where: str, key: str, value) -> str:
        space = ID_FIELDS.get((where, key))
        if space is not None and isinstance(value, int) and not isinstance(value, bool):
            slot = SPACES.index(space)
            self.ids[slot] = value
            return f"{_escape(_json(key))}: {{{slot + 1}}}"
        return f"{_escape(_json(key))}: {_escape(_json(value))}"


def _id_spans(events: list[dict]) -> dict[str, int]:
    """Per id space, max - min + 1 over the pass: the offset between two copies."""
    low: dict[str, int] = {}
    high: dict[str, int] = {}
    for event in events:
        for (where, key), space in ID_FIELDS.items():
            value = (event if where == "top" else event.get("args") or {}).get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                low[space] = min(low.get(space, value), value)
                high[space] = max(high.get(space, value), value)
    return {space: high[space] - low[space] + 1 if space in high else 0 for space in SPACES}


class ScaledTrace:
    """A trace whose recorded pass can be written any number of times."""

    def __init__(self, trace: dict):
        events = trace["traceEvents"]
        self.header = {k: v for k, v in trace.items() if k != "traceEvents"}
        self.pass_events = [e for e in events if _is_repeated(e)]
        self.other_events = [e for e in events if not _is_repeated(e)]
        starts = [_ns(e["ts"]) for e in self.pass_events]
        ends = [_ns(e["ts"]) + _ns(e.get("dur", 0)) for e in self.pass_events]
        self.t0, self.t1 = min(starts), max(ends)
        self.period = self.t1 - self.t0 + GAP_NS
        self.id_spans = _id_spans(self.pass_events)
        self.templates = [_Template(e, self.t0) for e in self.pass_events]

    def copy_text(self, k: int) -> str:
        """The k-th copy of the pass (k = 0 is the original), events separated by ``,\\n``."""
        shift = self.t0 + k * self.period
        o1, o2, o3, o4 = (k * self.id_spans[space] for space in SPACES)
        return ",\n".join(
            t.text.format(_micros(t.ts + shift), t.ids[0] + o1, t.ids[1] + o2, t.ids[2] + o3, t.ids[3] + o4)
            for t in self.templates
        )

    def copies_for(self, size_bytes: int) -> int:
        """How many copies make a file of about ``size_bytes``."""
        return max(1, round(size_bytes / (len(self.copy_text(0).encode()) + 2)))

    def chunks(self, copies: int):
        """The whole scaled trace as a sequence of text chunks (one per copy of the pass)."""
        head = dict(self.header)
        trace_name = head.pop("traceName", None)
        yield "{\n" + "".join(f"  {_json(k)}: {_json(v)},\n" for k, v in head.items()) + '  "traceEvents": [\n'
        extra = (copies - 1) * self.period
        for k in range(copies):
            yield ("" if k == 0 else ",\n") + self.copy_text(k)
        for event in self.other_events:
            event = dict(event)
            if event.get("cat") == "Trace" and "dur" in event:  # the profiler's own span covers every copy
                event["dur"] = Decimal(_micros(_ns(event["dur"]) + extra))
            elif "ts" in event and _ns(event["ts"]) >= self.t1:  # e.g. "Record Window End"
                event["ts"] = Decimal(_micros(_ns(event["ts"]) + extra))
            once = _Template(event, 0)
            yield ",\n" + once.text.format(_micros(once.ts), *once.ids)
        tail = "" if trace_name is None else f',\n  "traceName": {_json(trace_name)}'
        yield f"\n  ]{tail}\n}}\n"


def write_scaled(
    source: str | os.PathLike,
    out: str | os.PathLike,
    *,
    copies: int | None = None,
    size: int | None = None,
    gzip_copy: bool = False,
    members: bool = False,
) -> dict:
    """Write the scaled trace to ``out`` and, with ``gzip_copy``, ``out + '.gz'`` too.

    ``out`` ending in ``.gz`` writes the gzip file only (``size`` is then the size of its JSON). ``members``: the
    gzip file as the recorder writes it (indexed members at ISA-L's level 2, analyzer/gzip_members.py), not one
    member at zlib's level 3."""
    scaled = ScaledTrace(load_trace(source))
    if copies is None:
        copies = scaled.copies_for(size or 0)
    out = Path(out)
    gz_only = out.suffix == ".gz"
    gz_path = out if gz_only else Path(f"{out}.gz")
    json_bytes = 0
    with contextlib.ExitStack() as files:
        sinks = [] if gz_only else [files.enter_context(open(out, "wb"))]
        if gz_only or gzip_copy:
            if members:
                from kernelscope.analyzer.gzip_members import MemberWriter

                writer = MemberWriter(files.enter_context(open(gz_path, "wb")), MEMBERS_LEVEL)
                sinks.append(files.enter_context(writer))
            else:
                sinks.append(files.enter_context(gzip.open(gz_path, "wb", compresslevel=GZIP_LEVEL)))
        for text in scaled.chunks(copies):
            data = text.encode()
            json_bytes += len(data)
            for sink in sinks:
                sink.write(data)
    events = copies * len(scaled.pass_events) + len(scaled.other_events)
    result = {"path": str(out), "copies": copies, "events": events, "bytes": json_bytes}
    if gz_only or gzip_copy:
        result["gz_path"] = str(gz_path)
        result["gz_bytes"] = gz_path.stat().st_size
    return result


def parse_size(text: str) -> int:
    """``"300MB"`` → bytes (B, KB, MB, GB; binary units)."""
    text = text.strip().upper()
    for unit in ("KB", "MB", "GB", "B"):
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * UNITS[unit])
    return int(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="a run directory or a Kineto trace (.json / .json.gz)")
    parser.add_argument("out", help="the scaled trace to write (.json; .json.gz for the gzip file only)")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--copies", type=int, help="how many times to repeat the recorded pass")
    group.add_argument("--size", type=parse_size, help="target size of the .json, e.g. 100MB, 1GB")
    parser.add_argument("--gzip", action="store_true", help="also write OUT.gz (gzip level 3, as the recorder)")
    parser.add_argument(
        "--members", action="store_true", help="the .gz in indexed members, as the recorder writes it (isal level 2)"
    )
    args = parser.parse_args(argv)
    result = write_scaled(
        args.source, args.out, copies=args.copies, size=args.size, gzip_copy=args.gzip, members=args.members
    )
    print(json.dumps(result), file=sys.stdout)


if __name__ == "__main__":
    main()
