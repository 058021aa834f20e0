"""The reference's reading of a trace file: its events as plain dicts, the 2021 format's read as the later one,
"B"/"E" pairs made complete events, device events without a correlation linked through their flows, timestamps as
exact decimals (tests/reference.py attributes them).
"""

from __future__ import annotations

import json
import re
import zlib
from decimal import Decimal
from pathlib import Path

from reference_devices import fork_device_category, is_launch, npu_tasks_as_device_events, processes_apart

DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


# torch 1.8-1.9's category names, and the later ones the analyzer reads them as
LEGACY_CATS = {
    "Kernel": "kernel",
    "Memcpy": "gpu_memcpy",
    "Memset": "gpu_memset",
    "Runtime": "cuda_runtime",
    "Operator": "cpu_op",
    "User": "gpu_user_annotation",
}
# the events that roctracer's traces link by "External id" alone
ROCTRACER_LINKED = {*DEVICE_CATS, "cuda_runtime", "cuda_driver"}


def _without_lone_surrogates(value):
    """``value`` with each lone surrogate in its strings as U+FFFD (json.loads keeps them; a pair is one character)."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value


def _metrics_record(e: dict) -> bool:
    """Kineto's XPU scope profiler's record of a kernel's metrics (handleScopeRecord): a "kernel" named "metrics: …"
    with a kernel_id and neither correlation nor External id."""
    args = e.get("args")
    return (
        e.get("cat") == "kernel"
        and isinstance(e.get("name"), str)
        and e["name"].startswith("metrics: ")
        and isinstance(args, dict)
        and "kernel_id" in args
        and args.get("correlation") is None
        and args.get("External id") is None
    )


def load_events(path: Path) -> list[dict]:
    """The trace's events, the 2021 format's read as the later one: legacy categories renamed, a memory event
    without cat given cpu_instant_event, a launch's or device event's "external id" as its "External id"; in a
    trace none of whose device events and launches (of any runtime) has a correlation (roctracer's), each CUDA/ROCm
    one's "External id" moved to its correlation, or, where no launch has an External id, each device event's kept (its
    operator's) and its correlation -1 less its place in the trace; one that has neither key gets that correlation
    too (no launch, no operator)."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = _gunzip(raw)
    # a byte that is not UTF-8 reads as U+FFFD, each one, a raw control character in a string as itself, and a byte
    # order mark before the JSON is left out (analyzer/json_text.py)
    text = re.sub("[\udc80-\udcff]", "\ufffd", raw.decode("utf-8", "surrogateescape")).removeprefix("\ufeff")
    try:
        doc = json.loads(text, parse_float=Decimal, strict=False)
    except json.JSONDecodeError:  # the Chrome format's bare array may leave off its "]" (and end in a comma)
        if not text.lstrip().startswith("["):
            raise
        doc = json.loads(text.rstrip().removesuffix(",") + "]", parse_float=Decimal, strict=False)
    if re.search(r"\\u[dD][89a-fA-F]", text):  # an escape of a lone UTF-16 surrogate reads as U+FFFD
        doc = _without_lone_surrogates(doc)
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    for e in events:
        if not isinstance(e, dict):
            continue
        if e.get("cat") in LEGACY_CATS:
            e["cat"] = LEGACY_CATS[e["cat"]]
        elif fork_device_category(e.get("cat")):
            e["cat"] = fork_device_category(e["cat"])
        elif e.get("cat") is None and e.get("ph") == "i" and e.get("name") == "[memory]":
            e["cat"] = "cpu_instant_event"
        args = e.get("args")
        if isinstance(args, dict) and list(args) == ["args"] and isinstance(args["args"], dict):
            e["args"] = args = args["args"]  # Perfetto's JSON export nests each event's args in "args"
        if isinstance(args, dict) and args.get("External id") is None and "external id" in args:
            args["External id"] = args["external id"]
        if _metrics_record(e):  # the XPU scope profiler's, filed as a kernel: no device work
            e["cat"] = "xpu_scope_profiler"
        for key in ("pid", "tid"):  # the text of an integer is that integer's thread, as Chrome and Perfetto read it
            value = e.get(key)
            if isinstance(value, str) and re.fullmatch(r"0|-?[1-9][0-9]*", value) and -(2**63) <= int(value) < 2**63:
                e[key] = int(value)
        for key in ("correlation", "External id"):  # and so do these, as the readers cast them to integers
            if isinstance(args, dict) and isinstance(args.get(key), str) and re.fullmatch(r"-?[0-9]{1,18}", args[key]):
                args[key] = int(args[key])
    _pair_spans(events)
    npu_tasks_as_device_events(events)
    linked = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in ROCTRACER_LINKED]
    launches = [e for e in events if isinstance(e, dict) and is_launch(e.get("cat"))]  # of any runtime
    if not any("correlation" in (e.get("args") or {}) for e in linked + launches):
        launches_have_ids = any(
            isinstance((e.get("args") or {}).get("External id"), int) for e in linked if e.get("cat") not in DEVICE_CATS
        )
        linked_ids = {id(e) for e in linked}
        for place, e in enumerate(events):
            args = e.get("args") if id(e) in linked_ids else None
            if id(e) in linked_ids and not isinstance(args, dict):
                e["args"] = args = {}
            if not isinstance(args, dict):
                continue
            if not isinstance(args.get("External id"), int):  # nothing links it: a row of its own, nothing named
                args["correlation"] = -1 - place
            elif launches_have_ids:  # roctracer's: the launch's and its kernels' correlation id
                args["correlation"] = args.pop("External id")
            elif e.get("cat") in DEVICE_CATS:  # no launch to link: its operator's, and a launch the trace lacks
                args["correlation"] = -1 - place
    else:
        _link_through_flows(events)
    processes_apart(events)
    return events


def _gunzip(data: bytes) -> bytes:
    """Every gzip member of ``data`` decompressed, one after another; after the last only blanks (whitespace, zeros)
    may follow, which are left out."""
    out = []
    while data.strip(b" \t\r\n\0"):
        data = data.lstrip(b"\0")  # zeros may pad a member (gzip readers skip them)
        decoder = zlib.decompressobj(31)
        out.append(decoder.decompress(data))
        assert decoder.eof, "a gzip member cut short"
        data = decoder.unused_data
    return b"".join(out)


def _pair_spans(events: list) -> None:
    """Each "B" event ended by an "E" becomes the complete event the pair stands for: per thread, in order of time, a
    stack of open "B"s; an "E" pops the top (or, with none open, is ignored). At one time the "E"s come first, then
    the "B"s (each in the file's order), except at a time where that order has an "E" end a span of another name while
    a "B" of the "E"'s name begins at that time: there the file's order. The "B" takes ph "X", the time up to its "E"
    for dur and the "E"'s args over its own."""
    marks = [e for e in events if isinstance(e, dict) and e.get("ph") in ("B", "E") and "ts" in e]
    threads: dict[tuple, list[dict]] = {}
    for e in marks:  # each thread's events in the file's order
        threads.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    for thread in threads.values():
        file_order = {id(e): place for place, e in enumerate(thread)}
        ends_first = dict.fromkeys((ns(e["ts"]) for e in thread), True)  # time -> whether the "E"s come first there
        begun = {(ns(e["ts"]), e.get("name")) for e in thread if e["ph"] == "B"}
        for at, begin, end in _stack_pairs(thread, ends_first, file_order):
            named = begin.get("name") is not None and end.get("name") is not None
            if named and begin["name"] != end["name"] and (at, end["name"]) in begun:
                ends_first[at] = False
        for _, begin, end in _stack_pairs(thread, ends_first, file_order):
            begin["ph"], begin["dur"] = "X", Decimal(str(end["ts"])) - Decimal(str(begin["ts"]))
            if isinstance(end.get("args"), dict):
                begin["args"] = {**(begin.get("args") or {}), **end["args"]}


def _stack_pairs(thread: list, ends_first: dict, file_order: dict) -> list[tuple]:
    """(time of the "E", its "B", the "E") of each pair a stack makes of one thread's events in order of time, and at
    each time the "E"s first where ``ends_first`` says so, then the file's order."""

    def order(e):
        at = ns(e["ts"])
        return at, (0 if e["ph"] == "E" else 1) if ends_first[at] else 0, file_order[id(e)]

    stack, pairs = [], []
    for e in sorted(thread, key=order):
        if e["ph"] == "B":
            stack.append(e)
        elif stack:
            pairs.append((ns(e["ts"]), stack.pop(), e))
    return pairs


def _link_through_flows(events: list) -> None:
    """A device event without a correlation, in a trace whose launches have them, takes the correlation of the launch
    its ac2g flow starts in: the finish ("f") on its own pid and tid within it (at its start, or before its end), the
    start ("s") of the same id, and the
    innermost launch (latest start, then shortest) on the start's thread that holds it."""
    objects = [e for e in events if isinstance(e, dict)]
    starts = {e.get("id"): e for e in objects if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    finishes = [e for e in objects if e.get("ph") == "f" and e.get("cat") == "ac2g"]
    launches = [
        e
        for e in objects
        if e.get("ph") == "X" and is_launch(e.get("cat")) and isinstance((e.get("args") or {}).get("correlation"), int)
    ]
    for e in objects:
        args = e.get("args") or {}
        if e.get("ph") != "X" or e.get("cat") not in DEVICE_CATS or "correlation" in args:
            continue
        start, end = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
        holding = []
        for f in finishes:
            s = starts.get(f.get("id"))
            at = ns(f["ts"])
            on_it = (f.get("pid"), f.get("tid")) == (e.get("pid"), e.get("tid")) and (at == start or start <= at < end)
            if not on_it or s is None:
                continue
            for launch in launches:
                launch_start = ns(launch["ts"])
                if (launch.get("pid"), launch.get("tid")) == (s.get("pid"), s.get("tid")) and (
                    launch_start <= ns(s["ts"]) <= launch_start + ns(launch["dur"])
                ):
                    holding.append(((launch_start, -ns(launch["dur"])), launch["args"]["correlation"]))
        if holding:
            e["args"] = {**args, "correlation": max(holding)[1]}


def ns(value) -> int:
    return int(Decimal(value) * 1000)
