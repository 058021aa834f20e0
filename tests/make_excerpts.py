"""Write tests/data/excerpts/: small excerpts of the real traces of sample_traces/external/, one per kind of trace
from the wild, for tests that must run in milliseconds (tests/test_plain_traces.py).

    python tests/make_excerpts.py          # rewrite the excerpts (then review their diff)

An excerpt keeps a few launches of its source: each launch, every operator, annotation and Python frame that holds
it on its thread, and its device events (the first few of a graph replay), in the source's order, with the source's
bytes for every number (ts, dur: no float rounding). Only the args the attribution reads are kept (ids, stream,
device). Three excerpts are made from another one for devices no shared trace holds (MTIA's categories, CUPTI's range
profiler, an Intel XPU's streamless device events): see tests/data/excerpts/README.md.
"""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from scale_trace import _json as exact_json  # noqa: E402 (benchmarks/ is no package; its exact JSON writer)
from scale_trace import load_trace  # noqa: E402

EXTERNAL = REPO / "sample_traces" / "external"
OUT = REPO / "tests" / "data" / "excerpts"
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
RUNTIME = {"cuda_runtime", "cuda_driver", "Runtime"}
HOLDERS = {"cpu_op", "user_annotation", "python_function", "Operator"}
ARGS = {"External id", "external id", "correlation", "device", "stream", "Python id", "Python parent id"}
ARGS |= {"Python module id", "wait_on_stream", "wait_on_cuda_event_record_corr_id"}


def _span(event: dict) -> tuple[Decimal, Decimal]:
    start = Decimal(event["ts"])
    return start, start + Decimal(event.get("dur", 0))


def _external_id(event: dict):
    args = event.get("args") or {}
    return args.get("External id", args.get("external id"))


def launches_of_op(trace: dict, op: str, nth: int = 0) -> list[int]:
    """The runtime calls with device events made by the ``nth`` operator named ``op`` that made any."""
    events = trace["traceEvents"]
    with_device = {(e.get("args") or {}).get("correlation") for e in events if e.get("cat") in DEVICE}
    launches: dict = {}
    for i, e in enumerate(events):
        if e.get("cat") in RUNTIME and e["args"].get("correlation") in with_device:
            launches.setdefault(_external_id(e), []).append(i)
    ops = [e for e in events if e.get("cat") in ("cpu_op", "Operator") and e.get("name") == op]
    return [launches[external] for external in map(_external_id, ops) if external in launches][nth]


def launches_named(trace: dict, name: str, nth: int = 0) -> list[int]:
    return [[i for i, e in enumerate(trace["traceEvents"]) if e.get("cat") in RUNTIME and e.get("name") == name][nth]]


def excerpt(trace: dict, launches: list[int], device_events_per_launch: int | None = None) -> dict:
    """The trace's header and, for each launch (an index into traceEvents), what holds it and its device events."""
    events = trace["traceEvents"]
    keep = set(launches)
    for index in launches:
        launch = events[index]
        at = Decimal(launch["ts"])
        thread = (launch.get("pid"), launch.get("tid"))
        for i, e in enumerate(events):
            if e.get("ph") == "X" and e.get("cat") in HOLDERS and (e.get("pid"), e.get("tid")) == thread:
                start, end = _span(e)
                if start <= at < end:
                    keep.add(i)
        correlation = launch["args"]["correlation"]
        device = [
            i
            for i, e in enumerate(events)
            if e.get("ph") == "X" and e.get("cat") not in RUNTIME and e.get("cat") not in HOLDERS
            and (e.get("args") or {}).get("correlation") == correlation
        ]  # fmt: skip
        keep.update(sorted(device, key=lambda i: Decimal(events[i]["ts"]))[:device_events_per_launch])
    kept = []
    for i in sorted(keep):
        event = dict(events[i])
        event["args"] = {k: v for k, v in (event.get("args") or {}).items() if k in ARGS}
        kept.append(event)
    return {**_header(trace), "traceEvents": kept}


def _header(trace: dict) -> dict:
    """The trace's keys but the bulky ones: the GPUs' names, the rank, the versions and profiler options."""
    header = {k: v for k, v in trace.items() if k not in ("traceEvents", "metadata", "INFO", "traceName", "trace_id")}
    if "deviceProperties" in header:
        header["deviceProperties"] = [{"id": d.get("id"), "name": d.get("name")} for d in header["deviceProperties"]]
    if "distributedInfo" in header:
        header["distributedInfo"] = {k: header["distributedInfo"].get(k) for k in ("backend", "rank", "world_size")}
    return header


def as_device_category(trace: dict, device: str, runtime: str) -> dict:
    """The trace with its device events and launches filed under other categories (what a device kernelscope does not
    model looks like)."""
    events = []
    for e in trace["traceEvents"]:
        cat = e.get("cat")
        events.append({**e, "cat": device if cat in DEVICE else runtime if cat in RUNTIME else cat})
    return {**trace, "traceEvents": events}


def with_profiler_ranges(trace: dict) -> dict:
    """The trace with a CUPTI range-profiler range on the device over each kernel, as a range-profiler trace adds."""
    ranges = [
        {"ph": "X", "cat": "cuda_profiler_range", "name": f"range_{n}", "pid": e["pid"], "tid": e["tid"],
         "ts": e["ts"], "dur": e["dur"], "args": {}}
        for n, e in enumerate(e for e in trace["traceEvents"] if e.get("cat") == "kernel")
    ]  # fmt: skip
    return {**trace, "traceEvents": trace["traceEvents"] + ranges}


# Kineto's XPU plugin's names for the calls: Unified Runtime's launch and copy, Level Zero's launch (XPUActivity.h)
XPU_CALLS = {"cudaLaunchKernel": "urEnqueueKernelLaunch", "cudaMemcpyAsync": "urEnqueueUSMMemcpy",
             "cuLaunchKernel": "zeCommandListAppendLaunchKernel"}  # fmt: skip


def as_xpu(trace: dict) -> dict:
    """The trace as Kineto's XPU plugin writes it (XpuptiActivityHandlers.cpp): its calls filed as xpu_runtime and
    xpu_driver, and its device events with no "stream" arg, their SYCL queue written as the tid and as "sycl queue"."""
    events = []
    for e in trace["traceEvents"]:
        cat = e.get("cat")
        if cat in RUNTIME:
            e = {**e, "cat": cat.replace("cuda", "xpu"), "name": XPU_CALLS[e["name"]]}
        elif cat in DEVICE:
            args = {k: v for k, v in e["args"].items() if k != "stream"}
            e = {**e, "args": {**args, "sycl queue": e["tid"]}}
        events.append(e)
    return {**trace, "traceEvents": events}


def write(name: str, trace: dict) -> None:
    header = {k: v for k, v in trace.items() if k != "traceEvents"}
    lines = [f"  {exact_json(e)}" for e in trace["traceEvents"]]
    body = exact_json(header)[:-1] + (", " if header else "") + '"traceEvents": [\n' + ",\n".join(lines) + "\n]}\n"
    (OUT / name).write_text(body, encoding="utf-8")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    bert_ops = [("aten::addmm", 0), ("aten::native_layer_norm", 1), ("aten::add", 2), ("aten::all", 0),
                ("aten::_local_scalar_dense", 0), ("aten::gelu", 0)]  # fmt: skip
    bert = (("tl_h100_bert_small.json.gz", "frames_h100"), ("tl_mi300_bert_small.json.gz", "frames_mi300"))
    for source, name in bert:
        trace = load_trace(EXTERNAL / source)
        picked = excerpt(trace, [i for op, nth in bert_ops for i in launches_of_op(trace, op, nth)])
        write(f"{name}.json", picked)
        if name == "frames_h100":
            write("device_mtia.json", as_device_category(picked, "mtia_ccp_events", "mtia_runtime"))
            write("device_profiler_range.json", with_profiler_ranges(picked))
            write("device_xpu.json", as_xpu(picked))
    sglang = load_trace(EXTERNAL / "tl_sglang_qwen3_decode.json.gz")
    launches = launches_named(sglang, "hipGraphLaunch") + launches_named(sglang, "hipModuleLaunchKernel")
    launches += [i for op in ("aten::arange", "aten::neg", "aten::_foreach_copy_") for i in launches_of_op(sglang, op)]
    write("hip_graph_sglang.json", excerpt(sglang, launches, device_events_per_launch=3))
    sync = load_trace(EXTERNAL / "hta_event_sync_multi_stream.json.gz")
    write("epoch_event_sync.json", excerpt(sync, launches_of_op(sync, "aten::mm", 1)))
    resnet = load_trace(EXTERNAL / "kineto_resnet50_autograd_api_2021-02.pt.trace.json.gz")
    names = ("cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync")
    write("legacy_resnet50.json", excerpt(resnet, [i for name in names for i in launches_named(resnet, name)]))


if __name__ == "__main__":
    main()
