"""A device's process (Kineto writes device activity under the device's index as pid) that also holds events of a
launch category: IBM's Kineto fork for its Spyre AIU (kineto-spyre, libkineto/src/plugin/aiupti/
AiuptiActivityHandlers.cpp, handleMemoryActivity) files each device memory release as a `privateuse1_driver` call
with a correlation under the device's pid and a memory lane's tid (400), beside the memsets. That process launches
nothing: the trace is one process's, not several pasted into one file, and every row is the reference's."""

import gzip
import json
from pathlib import Path

import pytest
from conftest import assert_reads_as_original
from kernelscope.analyzer import load_run
from reference import assert_matches_reference

BERT = Path(__file__).resolve().parent.parent / "sample_traces" / "external" / "tl_h100_bert_small.json.gz"
HOST_PID, HOST_TID, DEVICE = 4242, 4242, 0


def _release(ts: float, correlation: int, device: int = DEVICE, category: str = "privateuse1_driver") -> dict:
    """A memory release as the Spyre plugin writes it: its metadata (call, device, context quoted, correlation, memory
    operation id, bytes, bandwidth) under pid = the device, tid = 400."""
    return {"ph": "X", "cat": category, "name": "Memory (Release)", "pid": device, "tid": 400, "ts": ts, "dur": 1.0,
            "args": {"call": "Release", "device": device, "context": str(HOST_PID), "correlation": correlation,
                     "memory operation id": 1, "bytes": 4096, "memory bandwidth (GB/s)": 4.096}}  # fmt: skip


def _spyre_trace() -> dict:
    """A matmul on an AIU in the fork's shapes: the operator, the `aiuLaunchControlBlocks` runtime call (its flow
    starts there: handleRuntimeActivity) and the kernel of its correlation (stream 1, a quoted context, cycles_ts); a
    data transfer and its memcpy on the lane of its copy kind (200: DtoH); a memset and a memory release on lane 400;
    the release's `[memory]` instant on the host thread. Neither runtime nor device events carry an External id (the
    plugin links them to no operator)."""
    host = {"pid": HOST_PID, "tid": HOST_TID}
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", **host, "ts": 1000.0, "dur": 100.0,
         "args": {"External id": 1}},
        {"ph": "X", "cat": "privateuse1_runtime", "name": "aiuLaunchControlBlocks", **host, "ts": 1010.0, "dur": 5.0,
         "args": {"correlation": 7, "num_cbs": 3}},
        {"ph": "s", "id": 7, **host, "ts": 1010.0, "cat": "ac2g", "name": "ac2g"},
        {"ph": "X", "cat": "kernel", "name": "aiu_matmul", "pid": DEVICE, "tid": 5, "ts": 1030.0, "dur": 9.0,
         "args": {"queued": 0, "submitted": 0, "device": DEVICE, "stream": 1, "context": "12", "correlation": 7,
                  "cycles_ts": [1, 2, 3, 4, 5]}},
        {"ph": "f", "id": 7, "pid": DEVICE, "tid": 5, "ts": 1030.0, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {"ph": "X", "cat": "privateuse1_runtime", "name": "aiuDataTransferDtoH", **host, "ts": 1050.0, "dur": 5.0,
         "args": {"correlation": 8, "bytes": 4096}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy (DtoH)", "pid": DEVICE, "tid": 200, "ts": 1060.0, "dur": 3.0,
         "args": {"call": "DtoH", "device": DEVICE, "context": "12", "correlation": 8, "memory operation id": 2,
                  "bytes": 4096, "memory bandwidth (GB/s)": 1.365, "cycles_ts": [1, 2, 3, 4, 5]}},
        {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": DEVICE, "tid": 400, "ts": 1120.0,
         "dur": 2.0, "args": {"call": "Memset", "device": DEVICE, "context": "12", "correlation": 9, "bytes": 4096,
                              "memory bandwidth (GB/s)": 2.048}},
        _release(1130.0, 10),
        {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", **host, "ts": 1130.0,
         "args": {"Total Reserved": 0, "Total Allocated": 0, "Bytes": -4096, "Addr": 123, "Device Id": DEVICE,
                  "Device Type": 1}},
    ]  # fmt: skip
    return {"schemaVersion": 1, "traceEvents": events}


def test_a_device_process_holding_driver_calls_is_no_rank_of_its_own(tmp_path):
    """Before, the release's pid counted as a second launching process: the file was read as two ranks pasted
    together, the memset attributed as rank 1's, at 0 µs from that rank's start, with a warning that no launch was
    found."""
    path = tmp_path / "spyre.json"
    path.write_text(json.dumps(_spyre_trace()))
    with load_run(path) as run:
        assert_matches_reference(run, path)
        assert run.ranks == [0]
        frame = run.profiling_df()
        assert dict(zip(frame["kernel"], frame["op"], strict=True)) == {
            "aiu_matmul": "aten::mm", "Memcpy (DtoH)": "aten::mm", "Memset (Device)": None,
        }  # fmt: skip


def test_driver_calls_on_every_device_of_a_real_trace_leave_its_rows_as_they_were(tmp_path):
    """The H100 BERT trace with a memory release filed on its device's process after each kernel: one rank (before,
    two: the device's process the second, holding the releases alone), every row and the launch check the
    original's."""
    doc = json.loads(gzip.decompress(BERT.read_bytes()))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    releases = [_release(e["ts"] + e["dur"], 10_000_000 + n, e["pid"]) for n, e in enumerate(kernels)]
    path = tmp_path / "released.json"
    assert_reads_as_original({**doc, "traceEvents": doc["traceEvents"] + releases}, path, BERT)
    with load_run(path) as run:
        assert run.ranks == [0]


def test_a_device_event_without_its_launch_beside_linked_ones_is_a_loss_not_a_trace_without_launches(tmp_path):
    """The Spyre plugin's launch calls (aiuLaunchControlBlocks) are not named as the launch check's kernel launches
    (…Kernel… with Launch or Invoke), so it counts none; its kernel and memcpy still reach their calls by correlation.
    The memset that reaches none is a lost launch: before, the warning said the trace held no kernel launches."""
    from click.testing import CliRunner
    from kernelscope.cli import main

    path = tmp_path / "spyre.json"
    path.write_text(json.dumps(_spyre_trace()))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "kernelscope: warning: the profiler lost events: 0 launches without device event, 1 device events "
        "without launch.\n"
    )


def test_device_events_of_a_category_not_modelled_beside_driver_calls_on_the_device_get_their_note(tmp_path):
    """A device's pid holding the plugin's driver calls is still a device's for the note on the device events
    kernelscope does not attribute (unmodeled.sql): before, any runtime or driver call made its pid a host's."""
    doc = _spyre_trace()
    doc["traceEvents"].append(
        {"ph": "X", "cat": "aiu_dma", "name": "DMA in", "pid": DEVICE, "tid": 300, "ts": 1020.0, "dur": 4.0}
    )
    path = tmp_path / "spyre_dma.json"
    path.write_text(json.dumps(doc))
    with load_run(path) as run:
        notes = run.notes()
    assert len(notes) == 1 and " aiu_dma (" in notes[0], notes


# What a second pid (200) holds beside a kernel launch of its own (of the category given first) and an event of a
# category kernelscope does not model: whether it is a device's pid (device events, no operator or annotation) decides
# both whether it is a process of its own (process_parts.sql: a second rank) and whether its unmodelled event gets a
# note (unmodeled.sql: a device's pid's does, a CPU process's not). Both read one rule (scope_names.sql,
# ks_device_pid), so the two answers must agree.
SECOND_PID_HOLDS = {
    "an operator": ("cuda_runtime", ["cpu_op"], False),
    "an annotation": ("cuda_runtime", ["user_annotation"], False),
    "an operator and a kernel": ("cuda_runtime", ["cpu_op", "kernel"], False),
    "a launch alone": ("cuda_runtime", [], False),
    "a launch of Kineto's device-agnostic runtime alone": ("runtime", [], False),
    "an XPU launch alone": ("xpu_runtime", [], False),
    "a kernel": ("cuda_runtime", ["kernel"], True),
    "a kernel beside a driver call": ("privateuse1_driver", ["kernel"], True),
    "a memcpy and a GPU-side annotation": ("cuda_runtime", ["gpu_memcpy", "gpu_user_annotation"], True),
    "a kernel and Python frames": ("cuda_runtime", ["kernel", "python_function"], True),
}


def _second_pid_trace(launch: str, holds: list[str]) -> dict:
    """A host process (pid 100) launching a kernel on device 0, and pid 200 holding a ``launch`` call of a kernel on
    device 1, an unmodelled `aiu_dma` event, and one event of each category of ``holds`` (a device event's
    correlation is a launch of pid 100's)."""

    def event(cat, name, pid, tid, ts, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": 5.0, "args": args}

    events = [
        {**event("cpu_op", "aten::mm", 100, 100, 10.0, **{"External id": 1}), "dur": 50.0},
        event("cuda_runtime", "cudaLaunchKernel", 100, 100, 12.0, correlation=1, **{"External id": 1}),
        event("kernel", "mm_kernel", 0, 7, 20.0, correlation=1, device=0, stream=7, **{"External id": 1}),
        event("cuda_runtime", "cudaLaunchKernel", 100, 100, 30.0, correlation=3, **{"External id": 1}),
        event(launch, "LaunchKernel", 200, 200, 12.0, correlation=2),
        event("kernel", "other_kernel", 1, 7, 20.0, correlation=2, device=1, stream=7),
        event("aiu_dma", "DMA in", 200, 300, 14.0),
    ]
    for n, cat in enumerate(holds):
        host = cat in ("cpu_op", "user_annotation")
        keys = {"correlation": 3, "device": 0, "stream": 9} if cat in ("kernel", "gpu_memcpy") else {}
        events.append(event(cat, f"{cat}_{n}", 200, 200 if host else 9, 40.0 + n, **keys))
    return {"schemaVersion": 1, "traceEvents": events}


@pytest.mark.parametrize("holds", list(SECOND_PID_HOLDS))
def test_a_pid_is_a_devices_alike_for_the_processes_and_for_the_notes(tmp_path, holds):
    """Before, a pid holding only a launch of Kineto's device-agnostic runtime was a process of its own, yet a device's
    for the notes (unmodeled.sql counted <device>_runtime and _driver calls alone as a CPU process's)."""
    launch, categories, device = SECOND_PID_HOLDS[holds]
    path = tmp_path / "two_pids.json"
    path.write_text(json.dumps(_second_pid_trace(launch, categories)))
    with load_run(path) as run:
        ranks, notes = run.ranks, run.notes()
    noted = any(" aiu_dma (" in note for note in notes)
    assert (len(ranks) == 1, noted) == (device, device), (ranks, notes)


def test_a_plugin_s_counters_filed_as_runtime_calls_without_correlations_are_no_process_of_their_own(tmp_path):
    """rdmatop (a PrivateUse1 profiler plugin) files its RDMA counters as complete `privateuse1_runtime` events of no
    duration and no correlation under a process of its own (pid 2147418112, tid 0, named "rdmatop"): a process that
    launches nothing, so the trace stays one process's, its rows the reference's, and no note."""
    doc = json.loads(gzip.decompress((BERT.parents[1] / "mlp" / "trace.json.gz").read_bytes()))
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(doc))
    counters = 2147418112
    doc["traceEvents"].append({"ph": "M", "name": "process_name", "pid": counters, "args": {"name": "rdmatop"}})
    for e in [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]:
        doc["traceEvents"].append(
            {"ph": "X", "dur": 0, "cat": "privateuse1_runtime", "name": "mlx5_0:1", "pid": counters, "tid": 0,
             "ts": e["ts"], "args": {"rdmatop_counter": 1, "tx_gbps": 12.5, "rx_gbps": 3.25}}  # fmt: skip
        )
    path = tmp_path / "rdmatop.json"
    path.write_text(json.dumps(doc))
    with load_run(plain) as run:
        rows = run.profiling_df()
    with load_run(path) as run:
        assert_matches_reference(run, path)
        assert run.ranks == [0] and run.notes() == []
        assert run.profiling_df().equals(rows)
