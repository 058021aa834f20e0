"""Real traces of writers other than torch.profiler on CUDA (sample_traces/external/), each one of a kind the others are
not: every one loads, and its rows are the reference's (tests/reference.py)."""

import gzip
import json
import pickle
from pathlib import Path

import pytest
from kernelscope.analyzer import load_run
from kernelscope.analyzer.errors import PICKLE, BadInputError
from reference import assert_matches_reference

REPO = Path(__file__).resolve().parent.parent
EXTERNAL = REPO / "sample_traces" / "external"
ROCTRACER = EXTERNAL / "tl_mi300_roctracer_gemm.json"  # launches and kernels linked by "External id" alone
ROCPROFILER = EXTERNAL / "tl_mi300x_rocprofiler_sdk_add.json"  # ROCm 7's rocprofiler-sdk


def test_a_roctracer_trace_links_its_kernels_to_their_launches_by_external_id():
    """A ROCm build of libkineto that traces through roctracer writes no correlation: a launch and its kernel carry
    the roctracer correlation id as "External id" (the ac2g flows between them too), and the operators External ids
    of another counter. Every kernel reaches its launch, and its operator by the launch's place in time."""
    with load_run(ROCTRACER) as run:
        assert_matches_reference(run, ROCTRACER)
        frame = run.profiling_df()
        assert len(frame) == 20 and set(frame["op"]) == {"aten::mm"} and set(frame["function_name"]) == {"torch.mm"}
        assert round(frame["kernel_us"].sum()) == 10_890
        check = run.launch_check()
        assert (check.launches, check.launches_without_device_event, check.device_events_without_launch) == (20, 0, 0)
        # the External ids are correlations, not operators': none of them names an operator of the trace
        linked = "SELECT count(*), count(external_id) FROM events WHERE cat IN ('kernel', 'cuda_runtime')"
        assert run.con.execute(linked).fetchone() == (52, 0)


def test_an_event_without_correlation_in_a_trace_that_writes_them_is_still_refused(tmp_path):
    """External ids stand for correlations only where no device event and no launch has one: in a trace that
    writes correlations, a kernel without one is a fault, and its External id (its operator's) would link it to
    whichever launch has that number for correlation. (Its ac2g flow, which would link it, is taken out too.)"""
    doc = json.loads(ROCTRACER.read_text())
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "cuda_runtime") and e.get("ph") == "X":
            e["args"]["correlation"] = e["args"].pop("External id")
    kernel = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel")
    doc["traceEvents"][kernel]["args"]["External id"] = doc["traceEvents"][kernel]["args"].pop("correlation")
    flow = doc["traceEvents"][kernel]["args"]["External id"]
    doc["traceEvents"][kernel + 1 :] = [e for e in doc["traceEvents"][kernel + 1 :] if e.get("id") != flow]
    path = tmp_path / "one_kernel_unlinked.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BadInputError, match=rf"traceEvents\[{kernel}\] \(kernel 'Cijk_.*has no args.correlation$"):
        load_run(path)


MI300_BERT = EXTERNAL / "tl_mi300_bert_small.json.gz"  # ROCm, torch 2.7: 60 kernels and a memcpy, each with its flow


def _linked_by_flows_alone(tmp_path, keep=lambda event: True):
    """The ROCm BERT trace as a writer that links a device event to its launch only by the ac2g flow between them
    writes it: its device events keep their operator's External id and lose their correlation (where ``keep`` says),
    and the flows' ids are renumbered, so that no flow id is a correlation."""
    doc = json.loads(gzip.decompress(MI300_BERT.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") == "ac2g":
            e["id"] += 7_000_000
        elif e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and keep(e):
            del e["args"]["correlation"]
    path = tmp_path / "flows.json"
    path.write_text(json.dumps(doc))
    return path


def test_device_events_without_correlations_reach_their_launches_through_their_flows(tmp_path):
    """Every device event reaches the launch its flow starts at (the flow's finish on its stream within it, bound to
    it by "bp": "e"), and is attributed as in the trace that wrote the correlations."""
    path = _linked_by_flows_alone(tmp_path)
    columns = ["kernel", "op", "function_name", "kernel_us", "correlation"]
    with load_run(MI300_BERT) as original, load_run(path) as run:
        assert_matches_reference(run, path)
        frame = run.profiling_df()
        assert len(frame) == 61 and frame["correlation"].notna().all()
        assert frame[columns].equals(original.profiling_df()[columns])
        assert run.launch_check() == original.launch_check()


def test_flows_link_device_events_to_launches_of_another_runtime_that_have_correlations(tmp_path):
    """The ROCm BERT trace linked by flows alone, its runtime calls filed as Intel XPU's (xpu_runtime): a launch of
    any runtime that has a correlation makes the device events' External ids their operators', so each reaches its
    launch through its flow, as where the device events keep their correlations, and is not a device event without
    launch named after its operator."""

    def as_xpu(path):
        doc = json.loads(path.read_text())
        for e in doc["traceEvents"]:
            if e.get("cat") in ("cuda_runtime", "cuda_driver"):
                e["cat"] = "xpu_runtime"
        path.write_text(json.dumps(doc))
        return path

    linked = as_xpu(_linked_by_flows_alone(tmp_path))
    original = tmp_path / "correlations.json"
    original.write_text(json.dumps(json.loads(gzip.decompress(MI300_BERT.read_bytes()))))
    with load_run(as_xpu(original)) as original_run, load_run(linked) as run:
        assert_matches_reference(run, linked)
        assert run.profiling_df().equals(original_run.profiling_df())
        assert run.launch_check() == original_run.launch_check()
        assert run.launch_check().device_events_without_launch == 0


def test_a_device_event_without_correlation_or_flow_is_still_refused(tmp_path):
    """A device event whose flow is gone too is no device event of a launch: refused as any without a correlation."""
    path = _linked_by_flows_alone(tmp_path)
    doc = json.loads(path.read_text())
    kernel = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel")
    ts = doc["traceEvents"][kernel]["ts"]
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not (e.get("ph") == "f" and e.get("ts") == ts)]
    path.write_text(json.dumps(doc))
    with pytest.raises(BadInputError, match=rf"traceEvents\[{kernel}\] \(kernel .*has no args.correlation$"):
        load_run(path)


def _as_nsys2chrome_writes_it(tmp_path, **kernel_args):
    """The rocprofiler-sdk trace as a converter of Nsight Systems reports to Chrome traces (ncompass's nsys2chrome)
    writes one: kernels on pid "Device 0", tid "Stream 7", whose args hold CUPTI's "correlationId" and neither
    "correlation" nor "External id"; runtime calls filed as "cuda_api"; no operators. ``kernel_args`` are added to
    every kernel's."""
    doc = json.loads(ROCPROFILER.read_text())
    events = []
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            args = {"correlationId": e["args"]["correlation"], "deviceId": 0, "streamId": 7, **kernel_args}
            events.append({**e, "pid": "Device 0", "tid": "Stream 7", "args": args})
        elif e.get("cat") == "cuda_runtime":
            events.append({**e, "cat": "cuda_api", "args": {"correlationId": e["args"]["correlation"]}})
    path = tmp_path / "nsys2chrome.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_trace_of_kernels_that_nothing_links_keeps_every_kernel_unattributed(tmp_path):
    """Where no device event and no launch has a correlation or an External id, nothing can link a kernel to a
    launch or an operator: every kernel is still a row, its time counted, its scopes unknown."""
    path = _as_nsys2chrome_writes_it(tmp_path)
    with load_run(ROCPROFILER) as original, load_run(path) as run:
        assert_matches_reference(run, path)
        frame, kernels = run.profiling_df(), original.profiling_df()
        assert frame[["kernel", "kernel_us"]].equals(kernels[["kernel", "kernel_us"]])
        assert frame[["function_name", "op", "module_name"]].isna().all().all()
        assert len(frame) == 10 and run.launch_check().device_events_without_launch == 10


def test_a_kernel_whose_correlation_is_no_integer_is_refused_where_no_event_has_one(tmp_path):
    path = _as_nsys2chrome_writes_it(tmp_path, correlation="x1")
    refused = r"\(kernel .*has args.correlation \"x1\", not an integer, and 9 other events the same way$"
    with pytest.raises(BadInputError, match=refused):
        load_run(path)


NOT_TORCH = "holds no device events (kernel, memcpy, memset) and no CPU operators: it is "
# what TensorFlow's and JAX's profilers write for the trace viewer (trace.json.gz), and TensorFlow 1's timeline
JAX = {
    "displayTimeUnit": "ns",
    "metadata": {"highres-ticks": True},
    "traceEvents": [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:GPU:0 (NVIDIA H100)"}},
        {"ph": "X", "pid": 1, "tid": 2, "ts": 100.5, "dur": 20.25, "name": "fusion.1", "args": {"correlation_id": "1"}},
        {"ph": "M", "pid": 701, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "X", "pid": 701, "tid": 3, "ts": 60, "dur": 5, "name": "cuLaunch", "args": {"correlation_id": "1"}},
    ],
}
TF_TIMELINE = {
    "traceEvents": [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "/job:localhost/replica:0/task:0/device:GPU:0"}},
        {"ph": "X", "cat": "Op", "name": "MatMul", "pid": 1, "tid": 0, "ts": 1600000000000000, "dur": 12},
    ]
}
CHROME = {"traceEvents": [{"cat": "devtools.timeline", "name": "RunTask", "ph": "X", "ts": 1, "dur": 5, "pid": 1}]}
# nsys2json.py's output (chenyu-jiang/nsys2json): a bare array, kernels and NVTX ranges on the device's process
NSYS2JSON = [
    {"name": "forward", "ph": "X", "cat": "nvtx", "ts": 1733400000100.0, "dur": 50.0, "tid": "NVTX Thread 4242",
     "pid": "Device 0", "args": {}},
    {"name": "ampere_sgemm_128x64_tn", "ph": "X", "cat": "cuda", "ts": 1733400000123.456, "dur": 12.5,
     "tid": "Stream 7", "pid": "Device 0", "args": {}},
]  # fmt: skip


@pytest.mark.parametrize(
    "doc, what",
    [
        (JAX, "a TensorFlow or JAX profiler trace (process '/device:GPU:0 (NVIDIA H100)')"),
        (TF_TIMELINE, "a TensorFlow or JAX profiler trace (process '/job:localhost/replica:0/task:0/device:GPU:0')"),
        (CHROME, "a Chrome browser trace (category 'devtools.timeline')"),
        (
            NSYS2JSON,
            "an nvprof or Nsight Systems report in Chrome's format (category 'cuda', process 'Device 0')",
        ),
    ],
)
def test_a_trace_of_another_profiler_is_refused_naming_it(tmp_path, doc, what):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    assert str(raised.value) == f"{path}: {NOT_TORCH}{what}, not a torch.profiler trace"


@pytest.mark.parametrize(
    "data, what",
    [
        (b"SQLite format 3\x00" + b"\x10", "it is an SQLite database, as Nsight Systems exports its reports, not JSON"),
        (
            b"\n\x1c\x82\x01\x19\n\x17\x08\x01\x12\x13track_event" + bytes(64),
            "it is binary data that begins as a protobuf message does, as a Perfetto trace or an XPlane .pb, not JSON",
        ),
        (b"caf\xe9 au lait", "byte 0xe9 at line 1 column 4 is not UTF-8"),  # text, not JSON, not UTF-8
        (pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=2), PICKLE),  # a CUDA memory snapshot
        (pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=4), PICKLE),
    ],
)
def test_a_binary_file_of_another_profiler_is_refused_naming_it(tmp_path, data, what):
    path = tmp_path / "report.bin"
    path.write_bytes(data)
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    assert str(raised.value) == f"{path}: is not valid JSON ({what})"


class _Opens:
    """Unpickled, opens (and so makes) the file ``path``: what a pickle can do when it is loaded."""

    def __init__(self, path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_a_pickle_is_refused_by_its_first_bytes_and_never_unpickled(tmp_path, compressed):
    """torch.cuda.memory._dump_snapshot writes a pickle: named as one, plain or gzipped, and never loaded, which
    would run what it holds (here, make a file)."""
    import gzip

    made = tmp_path / "made_by_unpickling"
    data = pickle.dumps({"segments": [], "device_traces": [[_Opens(made)]]}, protocol=4)
    path = tmp_path / ("snapshot.pickle.gz" if compressed else "snapshot.pickle")
    path.write_bytes(gzip.compress(data) if compressed else data)
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    assert str(raised.value) == f"{path}: is not valid JSON ({PICKLE})"
    assert not made.exists()


def test_libkineto_s_own_test_trace_names_its_kernel_after_the_operator_around_its_launch():
    """libkineto's test writer (no torch): operators named op1…, a launch and kernel without External id, and
    cuda_sync events, which are no device events kernelscope attributes."""
    path = EXTERNAL / "kineto_libkineto_test_cuda_sync.json"
    with load_run(path) as run:
        assert_matches_reference(run, path)
        frame = run.profiling_df()
        assert frame[["kernel", "op", "function_name"]].values.tolist() == [["Kernel", "op1", "(other operator)"]]


MLP = REPO / "sample_traces" / "mlp" / "trace.json.gz"  # 6 kernels


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("part_bytes", [None, 4 << 10], ids=["one part", "parts of 4 KiB"])
def test_a_byte_that_is_not_utf8_reads_as_a_replacement_character(tmp_path, monkeypatch, compressed, part_bytes):
    """A name holding bytes that are not UTF-8 (Latin-1 text, a character cut short, torch 1.8's garbage names): each
    byte reads as U+FFFD in whichever part holds it, the trace loads with every row, and a note says how many."""
    import gzip

    from kernelscope.analyzer import ingest

    if part_bytes is not None:
        for name in ("MIN_PART_BYTES", "MAX_PART_BYTES", "STREAM_PART_BYTES"):
            monkeypatch.setattr(ingest, name, part_bytes)
    text = gzip.decompress(MLP.read_bytes())
    last = text.rindex(b'"name": "nvjet')
    text = text[:last] + text[last:].replace(b'"name": "nvjet', b'"name": "caf\xe9 \xe2\x82nvjet', 1)
    path = tmp_path / ("latin1.json.gz" if compressed else "latin1.json")
    path.write_bytes(gzip.compress(text) if compressed else text)
    with load_run(path) as run:
        assert_matches_reference(run, path)
        assert len(run.profiling_df()) == 6
        assert run.profiling_df()["kernel"].str.startswith("caf\ufffd \ufffd\ufffdnvjet").sum() == 1
        assert run.notes() == [f"{path}: holds 3 bytes that are not UTF-8, read as U+FFFD (\ufffd)"]


def test_two_cycles_of_one_worker_in_a_directory_are_named_as_such(tmp_path):
    """tensorboard_trace_handler writes one trace per cycle of a repeating schedule, <worker>.<timestamp>.pt.trace.json,
    none naming a rank: the directory is no job of ranks, and the message says what its traces are."""
    import shutil

    for stamp in ("1796405454339508786", "1796405454351176369"):
        shutil.copy(ROCTRACER, tmp_path / f"w0.{stamp}.pt.trace.json")
    with pytest.raises(BadInputError) as raised:
        load_run(tmp_path)
    assert str(raised.value) == (
        f"{tmp_path}: holds rank 0 twice (w0.1796405454339508786.pt.trace.json and"
        " w0.1796405454351176369.pt.trace.json: two profiling cycles of worker 'w0', as tensorboard_trace_handler"
        " names them): load each trace on its own"
    )


def test_a_rocprofiler_sdk_trace_names_its_kernels_after_the_torch_call_that_launched_them():
    """ROCm 7 through rocprofiler-sdk: kernel names end in '[clone .kd]', and hipDeviceSynchronize ends an ac2g flow
    on the CPU thread, which is no device event. Its 10 kernels are torch.add's, from its with_stack frames."""
    with load_run(ROCPROFILER) as run:
        assert_matches_reference(run, ROCPROFILER)
        frame = run.profiling_df()
        assert len(frame) == 10 and set(frame["function_name"]) == {"torch.add"} and set(frame["op"]) == {"aten::add"}
        assert round(frame["kernel_us"].sum(), 3) == 4210.194


def _trace_of_rank(path, rank):
    doc = json.loads(ROCPROFILER.read_text())
    doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def test_a_directory_of_one_directory_per_rank_loads_as_a_job(tmp_path):
    """A job that wrote each rank's trace into a directory of its own (rank0/, rank1/…: no manifest anywhere) reads as
    a directory of those traces, each the rank its distributedInfo names; two traces of one rank (one directory per
    iteration) are refused naming both with their directories."""
    for rank in (0, 1):
        _trace_of_rank(tmp_path / "job" / f"rank{rank}" / "trace.json", rank)
    with load_run(tmp_path / "job") as run:
        assert run.ranks == [0, 1] and len(run.profiling_df()) == 20
    for iteration in (10, 20):
        _trace_of_rank(tmp_path / "iterations" / f"iteration_{iteration}" / "rank0_trace.json", 0)
    with pytest.raises(BadInputError, match=r"holds rank 0 twice \(iteration_10/rank0_trace.json and iteration_20/"):
        load_run(tmp_path / "iterations")


TORCH_EXCERPT = EXTERNAL / "torch_inductor_test_analysis_excerpt.json"  # kernels with their operators' External ids


def test_kernels_of_a_trace_without_launches_are_their_operators_by_external_id():
    """A trace cut down to operators and kernels (torch's own test of its trace analysis) has no runtime call and no
    correlation: a kernel's External id cannot be a launch's there, only Kineto's own, its operator's. Each kernel is
    a device event whose launch the trace lacks (the launch check says so), attributed to that operator."""
    with load_run(TORCH_EXCERPT) as run:
        assert_matches_reference(run, TORCH_EXCERPT)
        frame = run.profiling_df()
        assert dict(zip(frame["kernel"], frame["op"], strict=True)) == {
            "void cutlass_addmm": "aten::addmm",
            "void convolution_kernel": "aten::convolution",
        }
        check = run.launch_check()
        assert (check.launches, check.device_events_without_launch) == (0, 2)
        assert run.con.execute("SELECT count(*) FROM events WHERE correlation >= 0").fetchone() == (0,)
