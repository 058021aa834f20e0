"""Traces whose launches come from two runtimes, each numbering its own calls: CUPTI numbers CUDA's runtime and driver
calls from one counter (CUpti_ActivityAPI.correlationId), Intel's PTI its XPU calls from another (Kineto's XPU plugin
writes its runtime call's own _correlation_id, XPUActivity.tpp), as an MTIA or PrivateUse1 plugin does, so the two
share correlations in a trace that profiles both. Each is the real H100 BERT trace, its later launches and their
device events moved to a second runtime and renumbered onto the earlier launches' correlations: every row, and the
launch check, must be the original trace's."""

import gzip
import json
from pathlib import Path

import pytest
from conftest import assert_reads_as_original
from kernelscope.analyzer import load_run
from reference import assert_matches_reference

BERT = Path(__file__).resolve().parent.parent / "sample_traces" / "external" / "tl_h100_bert_small.json.gz"
SECOND = {  # the second runtime's categories for CUDA's
    "xpu": {"cuda_runtime": "xpu_runtime", "cuda_driver": "xpu_driver"},
    "privateuse1": {"cuda_runtime": "privateuse1_runtime", "cuda_driver": "privateuse1_driver"},
    "mtia": {"cuda_runtime": "mtia_runtime", "cuda_driver": "mtia_runtime"},
}


def _two_runtimes(doc: dict, categories: dict) -> dict:
    """``doc`` with the later half of its launches (in time) in ``categories``, each taking the correlation of one of
    the earlier half, as do their device events; the ac2g flows left out (they are numbered by correlation too)."""
    events = [e for e in doc["traceEvents"] if e.get("cat") != "ac2g"]
    launches = sorted(
        (e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})),
        key=lambda e: e["ts"],
    )
    half = len(launches) // 2
    renumbered = {
        late["args"]["correlation"]: early["args"]["correlation"]
        for early, late in zip(launches[:half], launches[half:], strict=False)
    }
    moved = {id(e) for e in launches[half : 2 * half]}
    out = []
    for e in events:
        args = e.get("args") or {}
        if id(e) in moved:
            e = {**e, "cat": categories[e["cat"]], "args": {**args, "correlation": renumbered[args["correlation"]]}}
        elif e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and args.get("correlation") in renumbered:
            e = {**e, "args": {**args, "correlation": renumbered[args["correlation"]]}}
        out.append(e)
    return {**doc, "traceEvents": out}


@pytest.mark.parametrize("second", SECOND)
def test_device_events_reach_the_launch_of_their_own_runtime_where_two_share_a_correlation(tmp_path, second):
    """Before, the trace was refused (two launches with one correlation); each device event now reaches the launch
    that carries its External id, and each launch counts its own device events."""
    doc = _two_runtimes(json.loads(gzip.decompress(BERT.read_bytes())), SECOND[second])
    shared = {e["args"]["correlation"] for e in doc["traceEvents"] if e.get("cat", "").startswith(second)}
    assert len(shared) > 20  # launches of the two runtimes share these correlations
    assert_reads_as_original(doc, tmp_path / f"{second}.json", BERT)


def test_device_events_without_external_id_reach_the_last_launch_before_them(tmp_path):
    """Where device events carry no External id (a launch outside any operator has none), the launch of the two that
    is the last to start before the device event is its launch."""
    doc = _two_runtimes(json.loads(gzip.decompress(BERT.read_bytes())), SECOND["xpu"])
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            e["args"].pop("External id", None)
    assert_reads_as_original(doc, tmp_path / "no_external_id.json", BERT)


def test_a_lost_kernel_of_one_runtime_is_its_launch_s_loss_not_the_other_s(tmp_path):
    """With the device events of one shared correlation left out but the second runtime's, the first runtime's launch
    is the one launch without a device event."""
    doc = _two_runtimes(json.loads(gzip.decompress(BERT.read_bytes())), SECOND["xpu"])
    kernels = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            kernels.setdefault(e["args"]["correlation"], []).append(e)
    shared = {e["args"]["correlation"] for e in doc["traceEvents"] if e.get("cat") == "xpu_runtime"}
    corr = next(c for c in sorted(shared) if len(kernels.get(c, ())) == 2)
    first = min(kernels[corr], key=lambda e: e["ts"])  # the earlier launch's kernel: the first runtime's
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e is not first]
    path = tmp_path / "lost.json"
    path.write_text(json.dumps(doc))
    with load_run(BERT) as original, load_run(path) as run:
        assert_matches_reference(run, path)
        check = run.launch_check()
        assert (check.launches, check.launches_without_device_event) == (original.launch_check().launches, 1)


def test_the_native_repeats_check_groups_a_million_launch_categories_by_runtime_in_linear_time():
    """_kineto.c's has_repeats tells each launch category's runtime (ks_launch_family) by a hash table: it compared
    each category with every one before it, so a part naming 80,000 categories (10 MiB) took 9 s and one of 300,000
    (40 MiB, within one part) had not ended after 10 minutes. Two categories of one runtime (x7_runtime, x7_driver)
    sharing a correlation are still found, and one runtime's categories apart from another's of the same length are
    not confused."""
    import time

    from kernelscope.analyzer import ingest

    def launch(cat: str, correlation: int) -> str:
        return json.dumps(
            {"ph": "X", "cat": cat, "name": "xLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1,
             "args": {"correlation": correlation}}
        )  # fmt: skip

    many = [launch(f"r{i:07d}_runtime", i % 1000) for i in range(300_000)]  # every family its own, correlations shared
    for tail, repeats in (([], False), ([launch("x7_runtime", 5), launch("x7_driver", 5)], True)):
        part = ("[" + ", ".join(many + tail) + "]").encode()
        started = time.perf_counter()
        scanned = ingest.native_reader.scan(part, 0, False, True)
        assert time.perf_counter() - started < 20  # 2 s on two shared cores; the comparison of each with each: hours
        assert scanned[0] is not None and scanned[3] is repeats
