"""Device events without a "stream" arg: Kineto writes every device event's queue as its tid (pid the device, tid the
resource: ChromeTraceLogger), and the stream arg only where the device's plugin adds it. Intel's XPU plugin does not
(XpuptiActivityHandlers.cpp: the SYCL queue is the resource, and the "sycl queue" arg), nor does ROCm's roctracer
build of libkineto; their stream is their tid, for the rows' stream column and for the check that a device event is
not listed twice (validate.sql's rule 9)."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TESTS
from kernelscope.analyzer import load_run
from kernelscope.cli import main
from test_trace_text import reader  # noqa: F401 - the fixture of both readers

EXCERPTS = TESTS / "data" / "excerpts"
DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")
ROCTRACER = TESTS.parent / "sample_traces" / "external" / "tl_mi300_roctracer_gemm.json"


def _device_events(path: Path) -> dict[int, dict]:
    """Each device event of the trace at ``path`` by its position in traceEvents (the rows' event_id)."""
    events = json.loads(path.read_text())["traceEvents"]
    return {i: e for i, e in enumerate(events) if e.get("cat") in DEVICE}


def test_an_xpu_device_events_stream_is_its_queue():
    """Before, every row of the XPU excerpt had no stream (NULL), where the CUDA trace it is made from has stream 7."""
    xpu = EXCERPTS / "device_xpu.json"
    queues = {i: e["args"]["sycl queue"] for i, e in _device_events(xpu).items()}
    with load_run(xpu) as run:
        rows = run.profiling_df()
    with load_run(EXCERPTS / "frames_h100.json") as run:
        cuda = run.profiling_df()
    assert dict(zip(rows["event_id"], rows["stream"], strict=True)) == queues
    columns = ["event_id", "kernel", "device", "stream", "op", "function_name", "module_name"]
    assert rows[columns].equals(cuda[columns])


def test_a_roctracer_kernels_stream_is_its_tid_and_its_device_its_pid():
    """libkineto's roctracer build writes its kernels with neither device nor stream arg (pid 2, tid 0): pid 2 holds
    device events and no operator, so it is a device's (ks_device_pid), and Kineto files a device's work under its
    index. Before, every row's device was NULL."""
    tids = {i: e["tid"] for i, e in _device_events(ROCTRACER).items()}
    with load_run(ROCTRACER) as run:
        rows = run.profiling_df()
    assert len(rows) == len(tids) == 20
    assert dict(zip(rows["event_id"], rows["stream"], strict=True)) == tids
    assert set(rows["device"]) == {2}


def test_an_xpu_device_events_stream_is_the_queue_index_the_plugin_writes_as_its_tid(tmp_path):
    """Kineto's XPU plugin writes a device event's tid as the index of its SYCL queue among those it has seen
    (XpuptiActivityHandlers.cpp, getMappedQueueId: 0 for the first) and the queue's own id as the "sycl queue" arg: a
    trace recorded on Aurora (torch 2.10, PTI 0.17) has "tid": 0 and "sycl queue": 64 on its gemm_kernel. The stream is
    that index, the tid, whatever the arg holds; the rows are the excerpt's, their stream 0."""
    doc = json.loads((EXCERPTS / "device_xpu.json").read_text())
    for event in doc["traceEvents"]:
        if event.get("cat") in DEVICE:
            event["tid"], event["args"]["sycl queue"] = 0, 64
    path = tmp_path / "mapped_queues.json"
    path.write_text(json.dumps(doc))
    with load_run(path) as run:
        rows = run.profiling_df()
    with load_run(EXCERPTS / "device_xpu.json") as run:
        excerpt = run.profiling_df()
    assert set(rows["stream"]) == {0} and set(rows["device"]) == {0}
    columns = ["event_id", "kernel", "device", "op", "function_name", "module_name", "kernel_us"]
    assert rows[columns].equals(excerpt[columns])


INDUCTOR_EXCERPT = TESTS.parent / "sample_traces" / "external" / "torch_inductor_test_analysis_excerpt.json"


def test_a_device_event_filed_on_a_host_thread_has_no_stream_or_device_it_does_not_name(tmp_path):
    """Kineto files a device event under its device (pid) and stream (tid); torch's trace-analysis test filed its two
    kernels on the CPU thread that ran their operators (pid = tid = 1147039), with no device or stream arg. That tid
    is a host thread's, no stream, and that pid a process's, no device: both are unknown (NULL). Before, the rows'
    stream was 1147039. A stream or device arg of such an event is still its stream or device."""
    with load_run(INDUCTOR_EXCERPT) as run:
        rows = run.profiling_df()
    assert len(rows) == 2 and rows["stream"].isna().all() and rows["device"].isna().all()
    doc = json.loads(INDUCTOR_EXCERPT.read_text())
    for event in doc["traceEvents"]:
        if event["cat"] == "kernel":
            event["args"].update(device=0, stream=7)
    path = tmp_path / "with_args.json"
    path.write_text(json.dumps(doc))
    with load_run(path) as run:
        rows = run.profiling_df()
    assert list(rows["stream"]) == [7, 7] and list(rows["device"]) == [0, 0]


@pytest.mark.usefixtures("reader")
def test_a_device_event_with_a_device_arg_on_a_host_thread_takes_no_stream_from_it(tmp_path):
    """Kineto writes a device event's queue as its tid under the device's index as pid (pid = the device arg); one
    filed elsewhere, on a thread that runs operators or launches, names a host thread by its tid, not a queue, whether
    or not it names its device. Before, such a kernel with "device": 0 and no stream arg had stream 1147039, its
    operator's thread; its device arg is still its device. A kernel of the device's pid on a tid of no host thread (a
    queue, as the XPU plugin writes it) keeps its tid for stream, on a host's pid too."""
    doc = json.loads(INDUCTOR_EXCERPT.read_text())
    kernels = [e for e in doc["traceEvents"] if e["cat"] == "kernel"]
    for event in kernels:
        event["args"]["device"] = 0
    kernels[1]["tid"] = 5  # a lane of the process that runs nothing on the host: a queue
    path = tmp_path / "device_only.json"
    path.write_text(json.dumps(doc))
    with load_run(path) as run:
        rows = run.profiling_df().sort_values("event_id")
    assert list(rows["device"]) == [0, 0]
    assert rows["stream"].isna().tolist() == [True, False] and rows["stream"].iloc[1] == 5


def test_an_xpu_device_event_listed_twice_is_refused_as_a_cuda_one_is(tmp_path):
    """Before, the XPU excerpt with a kernel listed twice loaded, the kernel counted twice (7 rows for 6 device
    events), where the CUDA excerpt so changed is refused: a stream of NULL was never the same stream."""
    for name in ("frames_h100.json", "device_xpu.json"):
        doc = json.loads((EXCERPTS / name).read_text())
        first = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel")
        doc["traceEvents"].append(doc["traceEvents"][first])
        path = tmp_path / name
        path.write_text(json.dumps(doc))
        result = CliRunner().invoke(main, ["analyze", str(path)])
        assert result.exit_code == 2, (name, result.output)
        last = len(doc["traceEvents"]) - 1
        assert f"traceEvents[{last}] (kernel " in result.stderr, result.stderr
        assert f"repeats device event traceEvents[{first}] (same correlation, stream and start)" in result.stderr


def test_device_events_on_two_queues_at_one_start_are_no_repeat(tmp_path):
    """Two device events of one correlation and start on two queues (an XPU's tids) are two events, not one listed
    twice: the queue tells them apart as a stream does."""
    doc = json.loads((EXCERPTS / "device_xpu.json").read_text())
    first = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel")
    other = dict(doc["traceEvents"][first], tid=8, args={**doc["traceEvents"][first]["args"], "sycl queue": 8})
    doc["traceEvents"].append(other)
    path = tmp_path / "two_queues.json"
    path.write_text(json.dumps(doc))
    with load_run(path) as run:
        rows = run.profiling_df()
    assert sorted(rows.loc[rows["kernel"] == other["name"], "stream"]) == [7, 8]
