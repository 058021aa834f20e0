"""Kineto's XPU scope profiler (PTI >= 0.15, hardware metrics per kernel: libkineto/src/plugin/xpupti/
XpuptiActivityHandlers.cpp, handleScopeRecord) writes, for each kernel it measured, a record of its metrics as one
more event of category "kernel", named "metrics: <kernel>", on the kernel's device and stream from 1 ns before it to
1 ns after it (args kernel_id, queue and each metric; no correlation, no External id), and two counter events
("ph": "C", category xpu_scope_profiler). The record is no device work: the trace's rows, time and launch check are
those of the trace without it."""

import gzip
import json
from pathlib import Path

from conftest import assert_reads_as_original
from kernelscope.analyzer import load_run

BERT = Path(__file__).resolve().parent.parent / "sample_traces" / "external" / "tl_h100_bert_small.json.gz"


def _with_metrics(doc: dict) -> dict:
    """``doc`` with the scope profiler's three events after each kernel, as handleScopeRecord and ChromeTraceLogger
    write them (ts and dur in µs with 3 decimals, a metric with its unit in brackets)."""
    added = []
    for n, kernel in enumerate(e for e in doc["traceEvents"] if e.get("cat") == "kernel"):
        start, end = round(kernel["ts"] - 0.001, 3), round(kernel["ts"] + kernel["dur"] + 0.001, 3)
        where = {"pid": kernel["pid"], "tid": kernel["tid"]}
        metrics = {"GpuTime [ns]": int(kernel["dur"] * 1000), "XVE_ACTIVE [%]": 41.5}
        added += [
            {"ph": "X", "cat": "kernel", "name": f"metrics: {kernel['name']}", **where, "ts": start,
             "dur": round(end - start, 3), "args": {"kernel_id": n + 1, "queue": "0x5596a0c1e2d0", **metrics}},
            {"ph": "C", "cat": "xpu_scope_profiler", "name": "metrics", **where, "ts": start, "args": metrics},
            {"ph": "C", "cat": "xpu_scope_profiler", "name": "metrics", **where, "ts": end,
             "args": dict.fromkeys(metrics, 0)},
        ]  # fmt: skip
    return {**doc, "traceEvents": doc["traceEvents"] + added}


def test_the_scope_profiler_s_metrics_records_are_no_device_work(tmp_path):
    """Before, each record was a row of its own, launched by nothing: the device time doubled, and the launch check
    counted a lost launch per kernel."""
    doc = _with_metrics(json.loads(gzip.decompress(BERT.read_bytes())))
    assert sum(e["name"].startswith("metrics: ") for e in doc["traceEvents"]) == 60
    path = tmp_path / "metrics.json"
    assert_reads_as_original(doc, path, BERT)
    with load_run(path) as run:
        assert run.notes() == []
