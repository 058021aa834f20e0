"""An independent attribution, written the simplest way, to cross-check the SQL of the analyzer.

Per thread, scopes and operators are sorted by (start, -end) and walked with a stack (KINETO.md's
proven parent rule); each launch is placed in that walk and reads its enclosing scopes off the stack.
Device events reach their launch by correlation. Timestamps are parsed as exact decimals.
"""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path

import pandas as pd
from reference_frames import frame_scope

DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def load_events(path: Path) -> list[dict]:
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw, parse_float=Decimal)["traceEvents"]


def _ns(value) -> int:
    return int(Decimal(value) * 1000)


GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")


def reference_attribution(
    path: Path,
    module_prefix: str = "ks.module:",
    function_prefix: str = "ks.fn:",
    graph_replay_call: str | None = None,
    compiled_region_call: str | None = None,
) -> dict:
    """{event index: dict(module_name, function_label, op, call_op, kernel, kind, dur_ns)} for every row.

    ``graph_replay_call``, ``compiled_region_call``: the calls that the kernels of a graph launch, and of a compiled
    region ("Torch-Compiled Region" outermost operator), outside any call belong to, in a recording that names them
    from the trace (its manifest's annotation); the compiled region first."""
    events = load_events(path)
    spans = []
    for index, e in enumerate(events):
        if e.get("ph") != "X" or "ts" not in e or "dur" not in e:
            continue
        start = _ns(e["ts"])
        spans.append((index, e, start, start + _ns(e["dur"])))

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

    launch_by_corr: dict = {}
    launch_external: dict = {}  # a kernel that carries no External id has its launch's
    graph_launches: set = set()
    for i, e, s, _end in sorted(spans, key=lambda x: (x[2], x[0])):
        corr = e.get("args", {}).get("correlation")
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and corr is not None:
            launch_by_corr.setdefault(corr, (e["pid"], e["tid"], s))
            launch_external.setdefault(corr, e.get("args", {}).get("External id"))
            if e.get("name", "").startswith(GRAPH_LAUNCHES):
                graph_launches.add(corr)

    # Points at which to read the stack: launches (GPU) or leaf operators' starts (CPU).
    by_thread: dict = {}
    for i, e, s, end in spans:
        if role(e) is not None:
            by_thread.setdefault((e.get("pid"), e.get("tid")), []).append((s, -end, i, e, end))

    contexts: dict = {}  # (pid, tid, t) -> attribution read off the stack at time t
    is_leaf: dict = {}
    wanted: dict = {}
    if cpu_mode:
        for key, items in by_thread.items():
            for s, _neg, i, e, _end in items:
                if role(e) == "op":
                    wanted.setdefault(key, set()).add(s)
    else:
        for pid, tid, t in launch_by_corr.values():
            wanted.setdefault((pid, tid), set()).add(t)

    for key, items in by_thread.items():
        items.sort()
        points = sorted(wanted.get(key, ()))
        stack: list = []
        p = 0

        def read(t: int) -> None:
            live = [x for x in stack if x[1] > t]
            modules = [x for x in live if module_of(x[2]) is not None]
            calls = scoped_calls(live)
            ops = [x for x in live if role(x[2]) == "op"]
            fn_pos = calls[-1] if calls else -1
            below_fn = [x for n, x in enumerate(live) if n > fn_pos and role(x[2]) == "op"]
            contexts[(key[0], key[1], t)] = {
                "module_name": module_label(modules),
                "function_label": call_of(live[fn_pos][2]) if calls else None,
                "inner_op": ops[-1][2]["name"] if ops else None,
                "call_op": below_fn[0][2]["name"] if below_fn else None,
            }

        for s, _neg, i, e, end in items:
            while p < len(points) and points[p] < s:
                read(points[p])
                p += 1
            while stack and s >= stack[-1][1]:
                stack.pop()
            if role(e) == "op":
                parent_ops = [x for x in stack if role(x[2]) == "op"]
                if parent_ops:
                    is_leaf[parent_ops[-1][3]] = False
                is_leaf.setdefault(i, True)
            stack.append((s, end, e, i))
        while p < len(points):
            read(points[p])
            p += 1

    ops_by_external = {}
    for i, e, s, end in spans:
        ext = e.get("args", {}).get("External id")
        if role(e) == "op" and ext is not None:
            ops_by_external.setdefault(ext, e["name"])

    def named_from_the_trace(ctx: dict, graph_launch: bool) -> dict:
        if ctx["function_label"]:
            return ctx
        if compiled_region_call and (ctx["call_op"] or "").startswith("Torch-Compiled Region"):
            return {**ctx, "function_label": compiled_region_call}
        if graph_replay_call and graph_launch:
            return {**ctx, "function_label": graph_replay_call}
        return ctx

    rows = {}
    if cpu_mode:
        for i, e, s, end in spans:
            if role(e) == "op" and is_leaf.get(i):
                ctx = named_from_the_trace(contexts[(e["pid"], e["tid"], s)], False)
                rows[i] = {**ctx, "op": e["name"], "kernel": e["name"], "kind": "cpu", "dur_ns": end - s}
        return rows
    for i, e, s, end in device:
        args = e.get("args", {})
        launch = launch_by_corr.get(args.get("correlation"))
        ctx = contexts.get(launch) if launch else None
        ctx = ctx or {"module_name": None, "function_label": None, "inner_op": None, "call_op": None}
        external = args.get("External id", launch_external.get(args.get("correlation")))
        op = ops_by_external.get(external) or ctx["inner_op"]
        ctx = named_from_the_trace(ctx, args.get("correlation") in graph_launches)
        rows[i] = {**ctx, "op": op, "kernel": e["name"], "kind": DEVICE_CATS[e["cat"]], "dur_ns": end - s}
    return rows


def total_device_ns(path: Path) -> int:
    """Σ dur of the trace's device events (or of its leaf operators when it has none)."""
    return sum(r["dur_ns"] for r in reference_attribution(path).values())


def reference_launch_check(path: Path) -> tuple[int, int, int, int]:
    """(launches that must have device events, device events, such launches without one, device events
    without a launch), counted over the trace's complete events: the kernel and graph launches must."""
    events = [e for e in load_events(path) if e.get("ph") == "X"]
    runtime = {
        e["args"]["correlation"]: e["name"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and isinstance((e.get("args") or {}).get("correlation"), int)
    }
    must = {  # CUDA's and ROCm's (hip…) kernel launches, Launch…Kernel in any spelling, and graph launches
        corr for corr, name in runtime.items() if re.match(r"(cu|hip)\w*Launch\w*Kernel|(cuda|cu|hip)GraphLaunch", name)
    }
    device = [(e.get("args") or {}).get("correlation") for e in events if e.get("cat") in DEVICE_CATS]
    return len(must), len(device), len(must - set(device)), sum(corr not in runtime for corr in device)


def assert_matches_reference(run, trace_path: Path, module_prefix: str = "ks.module:", function_prefix: str = "ks.fn:"):
    """The analyzer's rows of ``run`` against reference_attribution of ``trace_path``, row by row."""
    frame = run.profiling_df()
    manifest = Path(trace_path).parent / "manifest.json"
    annotation = json.loads(manifest.read_text()).get("annotation", {}) if manifest.is_file() else {}
    reference = reference_attribution(
        trace_path,
        module_prefix,
        function_prefix,
        annotation.get("graph_replay_call"),
        annotation.get("compiled_region_call"),
    )
    assert len(frame) == len(reference), "every device event appears exactly once"
    assert frame["event_id"].is_unique
    assert set(frame["event_id"]) == set(reference)
    for row in frame.itertuples():
        expected = reference[row.event_id]
        assert row.sample_id is pd.NA or row.function_name is not None, f"event {row.event_id}: a sample, no function"
        label = row.function_name if row.sample_id is pd.NA else f"{row.function_name}#{row.sample_id}"
        assert (row.module_name, label, row.op, row.call_op, row.kernel, row.kind) == (
            expected["module_name"],
            expected["function_label"],
            expected["op"],
            expected["call_op"],
            expected["kernel"],
            expected["kind"],
        ), f"event {row.event_id}"
    total_ns = sum(r["dur_ns"] for r in reference.values())
    assert round(frame["kernel_us"].sum() * 1000) == total_ns, "Σ kernel_us is the trace's device time"
    check = run.launch_check()
    counted = (check.launches, check.device_events, check.launches_without_device_event)
    assert (*counted, check.device_events_without_launch) == reference_launch_check(trace_path)
