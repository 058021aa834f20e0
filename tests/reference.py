"""An independent attribution and summary, written the simplest way, to cross-check the SQL of the analyzer (the
trace file read by reference_events.py, device runtimes by reference_devices.py, frames by reference_frames.py).

Per thread, scopes and operators are sorted by (start, -end) and walked with a stack (KINETO.md's
proven parent rule); each launch is placed in that walk and reads its enclosing scopes off the stack, each CPU
operator (in a trace without device events) the spans of the stack that contain it, its parent among them.
Device events reach their launch by correlation. Timestamps are parsed as exact decimals. The summary
(describe_results) is computed from these rows and samples.json in plain Python.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from reference_devices import (
    flow_launch_points,
    is_launch,
    launch_of,
)
from reference_events import DEVICE_CATS, LEGACY_CATS, load_events, ns  # noqa: F401 (LEGACY_CATS: the tests' import)
from reference_frames import frame_scope

DYNAMO_CACHE_LOOKUP = "TorchDynamo Cache Lookup"  # dynamo's guards of a compiled call, before its region
# a launch that replays a graph: cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch, a fork's musaGraphLaunch…
GRAPH_LAUNCH = re.compile(r"\w*GraphLaunch")
# a launch that runs a kernel, of any device's runtime: Launch…Kernel (CUDA, ROCm, MUSA, Level Zero), Kernel…Launch
# (Intel's urEnqueueKernelLaunch, piEnqueueKernelLaunch), Invoke…Kernel (Cambricon's cnInvokeKernel)
KERNEL_LAUNCH = re.compile(r"\w*(Launch|Invoke)\w*Kernel|\w*Kernel\w*Launch")
# The call names of a trace without a manifest, or of a recording that names calls from the trace (docs/sql.md).
TRACE_CALLS = {
    "graph_replay_call": "torch.cuda.CUDAGraph.replay",
    "compiled_region_call": "torch.compile",
    "other_operator_call": "(other operator)",
}


def reference_attribution(
    path: Path,
    module_prefix: str = "ks.module:",
    function_prefix: str = "ks.fn:",
    graph_replay_call: str | None = None,
    compiled_region_call: str | None = None,
    other_operator_call: str | None = None,
) -> dict:
    """{event index: dict(module_name, function_label, op, call_op, kernel, kind, dur_ns, call_event)} for every row.

    ``graph_replay_call``, ``compiled_region_call``: the calls that the kernels of a graph launch, and of a compiled
    region ("Torch-Compiled Region" or "TorchDynamo Cache Lookup" outermost operator), outside any call belong to, in
    a recording that names them from the trace (its manifest's annotation); the compiled region first.
    ``other_operator_call``: where given, a row that is in no call after those is named after the outermost operator
    holding it in its innermost module (its own name when it holds "::", else this). ``call_event``: the event index
    of the scope or operator (or graph launch) that makes the row's call. A CPU row's ``dur_ns`` is its self time."""
    events = load_events(path)
    spans = []
    for index, e in enumerate(events):
        if e.get("ph") != "X" or "ts" not in e or "dur" not in e:
            continue
        start = ns(e["ts"])
        spans.append((index, e, start, start + ns(e["dur"])))

    # a trace without kernelscope's scopes takes its modules and calls from its Python frames (reference_frames.py)
    plain = not any(
        e.get("cat") in ("cpu_op", "user_annotation") and e.get("name", "").startswith((module_prefix, function_prefix))
        for _i, e, _s, _end in spans
    )

    def frame_of(e: dict) -> tuple[str, str] | None:
        if not plain or e.get("cat") != "python_function" or not isinstance(e.get("name"), str):
            return None
        return frame_scope(e["name"])

    def role(e: dict) -> str | None:
        """module, function (a call scope, or a functional's frame), torch_call (a torch-level call's frame: a scope
        only outside every other call), op, or None."""
        name, cat = e.get("name", ""), e.get("cat")
        if cat in ("cpu_op", "user_annotation") and name.startswith(module_prefix):
            return "module"
        if cat in ("cpu_op", "user_annotation") and name.startswith(function_prefix):
            return "function"
        if cat == "cpu_op":
            return "op"
        frame = frame_of(e)
        return {"module": "module", "functional": "function", "torch": "torch_call"}[frame[0]] if frame else None

    def module_of(e: dict) -> str | None:
        """The module a scope names: its own (ks.module:name) or the one folded into a call (ks.fn:call@name)."""
        if frame_of(e):
            return frame_of(e)[1] if role(e) == "module" else None
        if role(e) == "module":
            return e["name"][len(module_prefix) :]
        if role(e) == "function" and "@" in e["name"][len(function_prefix) :]:
            return e["name"][len(function_prefix) :].split("@", 1)[1]
        return None

    def call_of(e: dict) -> str:
        if frame_of(e):
            return frame_of(e)[1]
        return e["name"][len(function_prefix) :].split("@", 1)[0]

    def scoped_calls(live: list) -> list[int]:
        """Positions in ``live`` (outermost first) of the call scopes: every call scope and functional frame, a
        torch-level frame only where no other call holds it (as the recorder scopes them)."""
        positions, inside_call = [], False
        for n, x in enumerate(live):
            kind = role(x[2])
            if kind == "function" or (kind == "torch_call" and not inside_call):
                positions.append(n)
            inside_call = inside_call or kind in ("function", "torch_call")
        return positions

    def module_label(modules: list) -> str | None:
        """The innermost module scope's name; for module frames, the dotted chain of all of them."""
        if not modules:
            return None
        if frame_of(modules[-1][2]):
            return ".".join(module_of(x[2]) for x in modules if frame_of(x[2]))
        return module_of(modules[-1][2])

    device = [(i, e, s, end) for i, e, s, end in spans if e.get("cat") in DEVICE_CATS]
    cpu_mode = not device

    first_ops: dict = {}  # External id -> (pid, tid, start, end, event index) of the first operator that has it
    for i, e, s, end in spans:
        external = (e.get("args") or {}).get("External id")
        if role(e) == "op" and external is not None:
            first_ops.setdefault(external, (e.get("pid"), e.get("tid"), s, end, i))

    # correlation -> [(launch, event index, launch point (pid, tid, start))]: one per runtime, which each number their
    # own calls (a kernel that carries no External id has its launch's)
    launch_by_corr: dict = {}
    for i, e, s, _end in sorted(spans, key=lambda x: (x[2], x[0])):
        corr = (e.get("args") or {}).get("correlation")
        if is_launch(e.get("cat")) and corr is not None:
            pid, tid = e["pid"], e["tid"]
            op = first_ops.get((e.get("args") or {}).get("External id"))
            if op is not None and op[0] == pid and op[1] != tid and op[2] <= s < op[3]:
                tid = op[1]  # filed under another thread's id: it was made on its operator's thread
            launch_by_corr.setdefault(corr, []).append((e, i, (pid, tid, s)))

    by_thread: dict = {}  # of spans of equal start and end, a Python frame holds an operator, else the earlier one
    for i, e, s, end in spans:
        if role(e) is not None:
            by_thread.setdefault((e.get("pid"), e.get("tid")), []).append((s, -end, frame_of(e) is None, i, e, end))

    def read(holders: list, own: tuple | None = None) -> dict:
        """The attribution of a launch point or a CPU operator (``own``) read off the spans that hold it,
        outermost first. The call's operator is the first operator after the innermost call scope, the one
        named after the first with a namespace after the innermost module scope, else the first there (either of
        all without one); a CPU operator counts as holding itself there, not as its own parent (``inner_op``)."""
        chain = holders + ([own] if own else [])
        functions = scoped_calls(chain)
        modules = [n for n, x in enumerate(chain) if module_of(x[2]) is not None]

        def first_op_after(position: int) -> tuple | None:
            return next((x for x in chain[position + 1 :] if role(x[2]) == "op"), None)

        def first_namespaced_op_after(position: int) -> tuple | None:
            return next((x for x in chain[position + 1 :] if role(x[2]) == "op" and "::" in x[2]["name"]), None)

        ops = [x for x in holders if role(x[2]) == "op"]
        call_op = first_op_after(functions[-1] if functions else -1)
        after_module = modules[-1] if modules else -1
        named = first_namespaced_op_after(after_module) or first_op_after(after_module)
        return {
            "module_name": module_label([chain[n] for n in modules]),
            "function_label": call_of(chain[functions[-1]][2]) if functions else None,
            "function_event": chain[functions[-1]][3] if functions else None,
            "inner_op": ops[-1][2]["name"] if ops else None,
            "parent": ops[-1][3] if ops else None,
            "call_op": call_op[2]["name"] if call_op else None,
            "call_op_event": call_op[3] if call_op else None,
            "named_op": named[2]["name"] if named else None,
            "named_op_event": named[3] if named else None,
        }

    contexts: dict = {}  # (pid, tid, t) -> attribution of a launch at time t; an operator's: event index -> its
    wanted: dict = {}
    # a device event without a launch whose flow arrow survives was launched where the flow starts; one whose launch
    # the trace lacks otherwise is held as the operator its External id names is held
    flow_points = flow_launch_points(events, launch_by_corr) if not cpu_mode else {}
    lost = [
        e["args"]
        for _i, e, _s, _end in device
        if e["args"].get("correlation") not in launch_by_corr and id(e) not in flow_points
    ]
    held_ops = {first_ops[a["External id"]][4] for a in lost if a.get("External id") in first_ops}
    if not cpu_mode:
        for pid, tid, t in [*(x[2] for xs in launch_by_corr.values() for x in xs), *flow_points.values()]:
            wanted.setdefault((pid, tid), set()).add(t)

    for key, items in by_thread.items():
        items.sort()
        points = sorted(wanted.get(key, ()))
        stack: list = []
        p = 0
        for s, _neg, _not_frame, i, e, end in items:
            while p < len(points) and points[p] < s:
                contexts[(key[0], key[1], points[p])] = read([x for x in stack if x[1] > points[p]])
                p += 1
            while stack and s >= stack[-1][1]:
                stack.pop()
            entry = (s, end, e, i)
            if (cpu_mode or i in held_ops) and role(e) == "op":  # held by the spans that contain it, before it
                contexts[i] = read([x for x in stack if x[1] >= end and x[1] > s], entry)
            stack.append(entry)
        while p < len(points):
            contexts[(key[0], key[1], points[p])] = read([x for x in stack if x[1] > points[p]])
            p += 1

    ops_by_external = {}
    for i, e, s, end in spans:
        ext = (e.get("args") or {}).get("External id")
        if role(e) == "op" and ext is not None:
            ops_by_external.setdefault(ext, e["name"])

    def named_from_the_trace(ctx: dict, graph_launch: int | None) -> dict:
        if ctx["function_label"] is not None:
            return {**ctx, "call_event": ctx["function_event"]}
        call_op = ctx["call_op"] or ""
        if compiled_region_call and (call_op.startswith("Torch-Compiled Region") or call_op == DYNAMO_CACHE_LOOKUP):
            return {**ctx, "function_label": compiled_region_call, "call_event": ctx["call_op_event"]}
        if graph_replay_call and graph_launch is not None:
            return {**ctx, "function_label": graph_replay_call, "call_event": graph_launch}
        if other_operator_call and ctx["named_op"] is not None:
            name = ctx["named_op"] if "::" in ctx["named_op"] else other_operator_call
            return {**ctx, "function_label": name, "call_event": ctx["named_op_event"]}
        return {**ctx, "call_event": None}

    def row(ctx: dict) -> dict:
        keys = ("module_name", "function_label", "call_op", "call_event")
        return {k: ctx[k] for k in keys}

    rows = {}
    if cpu_mode:
        children_ns: dict = {}
        for i, e, s, end in spans:
            if role(e) == "op" and contexts[i]["parent"] is not None:
                children_ns[contexts[i]["parent"]] = children_ns.get(contexts[i]["parent"], 0) + end - s
        for i, e, s, end in spans:
            if role(e) == "op":
                ctx = named_from_the_trace(contexts[i], None)
                self_ns = end - s - children_ns.get(i, 0)
                rows[i] = {**row(ctx), "op": e["name"], "kernel": e["name"], "kind": "cpu", "dur_ns": self_ns}
        return rows
    empty = dict.fromkeys(("module_name", "function_label", "function_event", "inner_op", "call_op"))
    empty |= dict.fromkeys(("call_op_event", "named_op", "named_op_event"))
    for i, e, s, end in device:
        args = e.get("args") or {}
        candidates = launch_by_corr.get(args.get("correlation"))
        launched = launch_of(e, candidates) if candidates else None
        launch = launched[2] if launched else flow_points.get(id(e))
        if launch is None and args.get("External id") in first_ops:
            launch = first_ops[args["External id"]][4]
        ctx = (contexts.get(launch) if launch is not None else None) or empty
        external = args.get("External id", (launched[0].get("args") or {}).get("External id") if launched else None)
        op = ops_by_external.get(external) or ctx["inner_op"]
        graph_launch = launched[1] if launched and GRAPH_LAUNCH.match(launched[0].get("name", "")) else None
        ctx = named_from_the_trace(ctx, graph_launch)
        rows[i] = {**row(ctx), "op": op, "kernel": e["name"], "kind": DEVICE_CATS[e["cat"]], "dur_ns": end - s}
    return rows


def total_devicens(path: Path) -> int:
    """Σ dur of the trace's device events (or Σ self time of its operators when it has none)."""
    return sum(r["dur_ns"] for r in reference_attribution(path).values())


def reference_launch_check(path: Path) -> tuple[int, int, int, int]:
    """(launches that must have device events, device events, such launches without one, device events
    without a launch), counted over the trace's complete events: the kernel and graph launches must, but for those
    that a stream capture recorded (and that have none)."""
    events = [e for e in load_events(path) if e.get("ph") == "X"]
    runtime_events = {  # event index -> launch; by correlation, one per runtime
        i: e
        for i, e in enumerate(events)
        if is_launch(e.get("cat")) and isinstance((e.get("args") or {}).get("correlation"), int)
    }
    by_corr: dict = {}
    for i, e in runtime_events.items():
        by_corr.setdefault(e["args"]["correlation"], []).append((e, i))
    captures = _stream_captures(runtime_events)
    must = {  # kernel launches of any device's runtime, in any spelling, and graph launches
        i for i, e in runtime_events.items() if KERNEL_LAUNCH.match(e["name"]) or GRAPH_LAUNCH.match(e["name"])
    }
    device = [(e, (e.get("args") or {}).get("correlation")) for e in events if e.get("cat") in DEVICE_CATS]
    launched = {launch_of(e, by_corr[corr])[1] for e, corr in device if corr in by_corr}
    unmatched = must - launched
    captured = {i for i in unmatched if _captured(runtime_events[i], captures)} if unmatched else set()
    # a device event whose flow arrow names where it was launched from is not one without a launch
    without_launch = sum(corr not in by_corr for _e, corr in device) - len(
        flow_launch_points(load_events(path), by_corr)
    )
    return len(must - captured), len(device), len(unmatched - captured), without_launch


def _stream_captures(runtime_events: dict) -> dict:
    """(pid, tid) -> (times, capturing after each): the thread's calls that begin (+1) and end (-1) a stream
    capture, in time order, and how many captures it holds open after each."""
    steps: dict = {}
    for corr, e in runtime_events.items():
        step = 1 if "StreamBeginCapture" in e["name"] else -1 if "StreamEndCapture" in e["name"] else 0
        if step:
            steps.setdefault((e.get("pid"), e.get("tid")), []).append((ns(e["ts"]), corr, step))
    captures = {}
    for thread, calls in steps.items():
        calls.sort()
        open_after = list(itertools.accumulate(step for _, _, step in calls))
        captures[thread] = ([t for t, _, _ in calls], open_after)
    return captures


def _captured(launch: dict, captures: dict) -> bool:
    """A launch its thread made while capturing a stream: its capture calls that began before it opened more
    captures than they closed. Recorded into a graph, not run, it has no device event."""
    times, open_after = captures.get((launch.get("pid"), launch.get("tid")), ([], []))
    earlier = bisect.bisect_left(times, ns(launch["ts"]))
    return earlier > 0 and open_after[earlier - 1] > 0


def _us(ns: int):
    """``ns`` in µs, to half a nanosecond (or a double's precision, past 2^53 ns)."""
    return pytest.approx(ns / 1000, rel=1e-12, abs=5e-4)


def trace_calls(trace_path: Path) -> dict:
    """The call names a trace's rows get from the trace: a calls="all" recording of format 3 names graph replays
    and compiled regions in its manifest (and gets the operator rule); a trace without a manifest gets them all."""
    manifest = Path(trace_path).parent / "manifest.json"
    if not manifest.is_file():
        return dict(TRACE_CALLS)
    annotation = json.loads(manifest.read_text()).get("annotation", {})
    calls = {k: annotation.get(k) for k in ("graph_replay_call", "compiled_region_call")}
    return calls | {"other_operator_call": TRACE_CALLS["other_operator_call"] if calls["graph_replay_call"] else None}


def assert_matches_reference(run, trace_path: Path, module_prefix: str = "ks.module:", function_prefix: str = "ks.fn:"):
    """The analyzer's rows of ``run`` against reference_attribution of ``trace_path``, row by row."""
    frame = run.profiling_df()
    reference = reference_attribution(trace_path, module_prefix, function_prefix, **trace_calls(trace_path))
    assert len(frame) == len(reference), "every device event appears exactly once"
    assert frame["event_id"].is_unique
    assert set(frame["event_id"]) == set(reference)
    for row in frame.itertuples():
        expected = reference[row.event_id]
        assert row.sample_id is pd.NA or row.function_name is not None, f"event {row.event_id}: a sample, no function"
        label = row.function_name if row.sample_id is pd.NA else f"{row.function_name}#{row.sample_id}"
        call_event = None if row.call_event_id is pd.NA else row.call_event_id
        assert (row.module_name, label, row.op, row.call_op, row.kernel, row.kind, call_event) == (
            expected["module_name"],
            expected["function_label"],
            expected["op"],
            expected["call_op"],
            expected["kernel"],
            expected["kind"],
            expected["call_event"],
        ), f"event {row.event_id}"
        assert row.kernel_us == _us(expected["dur_ns"]), f"event {row.event_id}: its time"
    total_ns = sum(r["dur_ns"] for r in reference.values())
    assert frame["kernel_us"].sum() == _us(total_ns), "Σ kernel_us is the trace's device time"
    check = run.launch_check()
    counted = (check.launches, check.device_events, check.launches_without_device_event)
    assert (*counted, check.device_events_without_launch) == reference_launch_check(trace_path)


def reference_sample_totals(samples_json: Path) -> dict:
    """{function: (calls, distinct signatures, bytes of their tensors)} read straight from a samples.json: the
    summary's inputs for the functions whose samples were collected."""

    def tensor_bytes(node) -> int:
        if isinstance(node, dict):
            if isinstance(node.get("tensor"), dict):
                return node["tensor"]["nbytes"]
            return sum(tensor_bytes(v) for v in node.values())
        if isinstance(node, list):
            return sum(tensor_bytes(v) for v in node)
        return 0

    functions = json.loads(Path(samples_json).read_text())["functions"]
    totals = {}
    for name, entries in functions.items():
        size = sum(tensor_bytes([e["args"], e["kwargs"]]) for e in entries)
        totals[name] = (sum(e["calls"] for e in entries), len(entries), size)
    return totals


def reference_summary(rows: dict, samples: dict, calls_from_the_trace: dict, top_k: int | None = None) -> pd.DataFrame:
    """describe_results computed in plain Python from reference rows: per call its time (nested calls' rows are
    their own), share of all calls' time (0 when there is none), modules, and, from ``samples``
    (reference_sample_totals), calls, signatures and input MB where they were collected. A call named from the
    trace after a graph launch or an operator (``calls_from_the_trace``: trace_calls) counts the launches or
    operator events it is named after; most expensive first, ties by name."""
    calls: dict = {}
    for r in rows.values():
        if r["function_label"] is None:
            continue
        name = re.sub(r"#[0-9]+$", "", r["function_label"])
        call = calls.setdefault(name, {"ns": 0, "modules": set(), "events": set()})
        call["ns"] += r["dur_ns"]
        call["modules"] |= {r["module_name"]} - {None}
        call["events"].add(r["call_event"])

    def counted_by_its_events(name: str) -> bool:
        operator = calls_from_the_trace.get("other_operator_call")
        return name == calls_from_the_trace.get("graph_replay_call") or (
            operator is not None and ("::" in name or name == operator)
        )

    total_ns = sum(call["ns"] for call in calls.values())
    table = []
    for name, call in calls.items():
        collected = samples.get(name)
        if collected is not None:
            count, distinct, size = collected[0], collected[1], collected[2] / 2**20
        else:
            count = len(call["events"] - {None}) if counted_by_its_events(name) else math.nan
            distinct = size = math.nan
        share = 100.0 * call["ns"] / total_ns if total_ns > 0 else 0.0
        table.append((name, float(count), float(distinct), len(call["modules"]), call["ns"] / 1000, share, size))
    table.sort(key=lambda row: (-row[4], row[0]))
    columns = ["function_name", "calls", "num_distinct_samples", "num_modules", "time_spent_us"]
    return pd.DataFrame(table[:top_k], columns=columns + ["time_spent_pct", "tensor_size_MB"])
