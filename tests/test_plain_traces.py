"""Plain traces from the wild (no kernelscope scopes): modules and calls from their Python frames (frames.sql), ROCm's
launches, device categories kernelscope does not model, on the excerpts of tests/data/excerpts/ and on small
traces made here."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, SHARED_TRACES, TESTS
from kernelscope.analyzer import load_run
from kernelscope.cli import main
from reference import assert_matches_reference

EXCERPTS = TESTS / "data" / "excerpts"
MISC = next(p for p in SHARED_TRACES if p.name == "misc.json.gz")


def _excerpt_params() -> list:
    return [pytest.param(path, id=path.name) for path in sorted(EXCERPTS.glob("*.json"))]


@pytest.mark.parametrize("path", _excerpt_params())
def test_every_excerpt_matches_the_reference_attribution(path):
    with load_run(path) as run:
        assert_matches_reference(run, path)


def test_the_excerpts_are_what_the_script_makes(tmp_path, monkeypatch):
    """tests/make_excerpts.py, run again into a scratch directory, writes the checked-in files byte for byte."""
    import make_excerpts

    monkeypatch.setattr(make_excerpts, "OUT", tmp_path)
    make_excerpts.main()
    made = sorted(p.name for p in tmp_path.glob("*.json"))
    assert made == sorted(p.name for p in EXCERPTS.glob("*.json"))
    for name in made:
        assert (tmp_path / name).read_bytes() == (EXCERPTS / name).read_bytes(), name


def test_frame_names_sql_is_what_torch_and_the_recorder_make():
    pytest.importorskip("torch")
    import make_frame_names

    assert make_frame_names.render() == make_frame_names.TARGET.read_text(encoding="utf-8"), (
        "analyzer/frame_names.sql is stale: run python tests/make_frame_names.py and review the diff"
    )


def _rows(path, check_reference: bool = False) -> dict:
    """{op (or kernel): (module_name, function_name)} of every row, checked against the reference if asked."""
    with load_run(path) as run:
        frame = run.profiling_df()
        if check_reference:
            assert_matches_reference(run, path)
    return {row.op or row.kernel: (row.module_name, row.function_name) for row in frame.itertuples()}


@pytest.mark.parametrize("name", ["frames_h100.json", "frames_mi300.json"])
def test_bert_frames_name_the_modules_and_calls_a_recording_would(name):
    layer = "BertLMHeadModel_0.BertModel_0.BertEncoder_0.BertLayer_0."
    assert _rows(EXCERPTS / name) == {
        "aten::addmm": (layer + "BertAttention_0.BertSdpaSelfAttention_0.Linear_0", "linear"),  # <built-in function>
        "aten::native_layer_norm": (layer + "BertAttention_0.BertSelfOutput_0.LayerNorm_1", "layer_norm"),  # .py
        "aten::gelu": (layer + "BertIntermediate_0.GELUActivation_0", "gelu"),
        "aten::all": ("BertLMHeadModel_0.BertModel_0", "torch.all"),  # <built-in method all of type object>
        # hidden + input: an operator slot, which makes no frame: the call is named after its operator
        "aten::add": (layer + "BertOutput_0", "aten::add"),
        "aten::_local_scalar_dense": ("BertLMHeadModel_0.BertModel_0", "aten::is_nonzero"),  # `if tensor:` likewise
    }


def test_rocm_launches_are_launches():
    """hipLaunchKernel, hipExtModuleLaunchKernel, hipModuleLaunchKernel launch kernels; hipGraphLaunch replays a
    graph, whose kernels share its correlation and are the replay's; the launch check counts them."""
    with load_run(EXCERPTS / "frames_mi300.json") as run:
        launches = run.sql("SELECT name FROM events WHERE cat = 'cuda_runtime' AND name LIKE '%Launch%'")["name"]
        assert set(launches) == {"hipLaunchKernel", "hipExtModuleLaunchKernel"}
        assert run.launch_check().launches == len(launches) == 5 and run.launch_check().ok
    with load_run(EXCERPTS / "hip_graph_sglang.json") as run:
        frame = run.profiling_df()
        check = run.launch_check()
    replay = frame[frame["function_name"] == "torch.cuda.CUDAGraph.replay"]
    assert len(replay) == 3 and replay["correlation"].nunique() == 1 and replay["op"].isna().all()
    assert (check.launches, check.device_events, check.ok) == (5, 7, True), "graph, Triton module and 3 kernels"
    named = {"torch.cuda.CUDAGraph.replay", "torch.arange", "Tensor.neg", "aten::_foreach_copy_"}  # the last: no frame
    assert set(frame["function_name"].dropna()) == named


# Kineto's names for an Intel XPU's runtime (Unified Runtime) and driver (Level Zero) calls, and a PrivateUse1 backend's
OTHER_RUNTIMES = {
    "xpu": ("xpu_runtime", "xpu_driver", "urEnqueueKernelLaunch", "zeCommandListAppendLaunchKernel"),
    "privateuse1": ("privateuse1_runtime", "privateuse1_driver", "aclrtLaunchKernel", "rtKernelLaunch"),
}


@pytest.mark.parametrize("device", sorted(OTHER_RUNTIMES))
def test_another_devices_runtime_launches_like_cudas(tmp_path, device):
    """The H100 BERT trace with its CUDA calls filed as another device's runtime and driver calls (as Kineto writes
    an XPU's) is attributed as the CUDA trace is: same rows, the reference's, no lost launches, no note."""
    runtime, driver, runtime_launch, driver_launch = OTHER_RUNTIMES[device]
    cuda = REPO / "sample_traces" / "external" / "tl_h100_bert_small.json.gz"
    trace = json.loads(gzip.decompress(cuda.read_bytes()))
    for event in trace["traceEvents"]:
        if event.get("cat") == "cuda_runtime":
            event["cat"], event["name"] = runtime, event["name"].replace("cudaLaunchKernel", runtime_launch)
        elif event.get("cat") == "cuda_driver":
            event["cat"], event["name"] = driver, event["name"].replace("cuLaunchKernel", driver_launch)
    if device == "xpu":  # a device-side wait (Kineto files it under pid -1), which holds no work of its own
        trace["traceEvents"].append(
            {
                "ph": "X",
                "cat": "xpu_sync",
                "name": "GPU_BARRIER_EXECUTION",
                "pid": -1,
                "tid": 3,
                "ts": trace["traceEvents"][0]["ts"],
                "dur": 1,
                "args": {},
            }
        )
    path = tmp_path / f"{device}.json"
    path.write_text(json.dumps(trace))
    columns = ["event_id", "module_name", "function_name", "op", "call_op", "kernel", "kernel_us"]
    with load_run(cuda) as run:
        expected = run.profiling_df()[columns]
    with load_run(path) as run:
        assert_matches_reference(run, path)
        frame = run.profiling_df()[columns]
        check = run.launch_check()
        notes = run.notes()
    assert frame["module_name"].notna().all() and len(frame) == 61
    assert frame.equals(expected)
    assert check.device_events_without_launch == 0 and check.device_events == 61 and check.ok
    assert notes == []


def _plain_trace(tmp_path: Path, frames: list[str], *, scope: str | None = None, name: str = "trace.json") -> Path:
    """A trace whose one kernel is launched inside ``frames`` (python_function events, outermost first, each
    holding the next) and inside an operator, optionally inside a kernelscope scope ``scope`` too."""
    holders = [("user_annotation", scope)] if scope else []
    holders += [("python_function", frame) for frame in frames] + [("cpu_op", "aten::mm")]
    events = [
        {"ph": "X", "cat": cat, "name": holder, "pid": 7, "tid": 7, "ts": 10 + n, "dur": 100 - 2 * n, "args": {}}
        for n, (cat, holder) in enumerate(holders)
    ]
    events[-1]["args"] = {"External id": 1}
    at = 10 + len(holders)
    events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": at,
                   "dur": 1, "args": {"External id": 1, "correlation": 5}})  # fmt: skip
    events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 200, "dur": 3,
                   "args": {"External id": 1, "correlation": 5, "device": 0, "stream": 7}})  # fmt: skip
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path


T = "<built-in method {} of type object at 0x7f3b9c1df960>"
FRAME_CASES = [  # (frames outermost first, module_name, function_name)
    (["nn.Module: Net_0", "net.py(9): forward", "nn.Module: Linear_0", "torch/nn/modules/linear.py(125): forward",
      "<built-in function linear>"], "Net_0.Linear_0", "linear"),
    (["/opt/conda/lib/python3.11/site-packages/torch/nn/functional.py(2889): layer_norm", T.format("layer_norm")],
     None, "layer_norm"),  # the torch-level call inside a functional is the functional's
    (["C:\\Python\\Lib\\site-packages\\torch\\nn\\functional.py(1697): gelu"], None, "gelu"),
    (["mytorch/nn/functional.py(3): linear"], None, "aten::mm"),  # not torch's: the operator names the call
    (["<built-in method sum of Tensor object at 0x1>", "torch/nn/functional.py(1500): relu"], None, "relu"),
    ([T.format("conv2d")], None, "conv2d"),  # F.conv2d is torch.conv2d: the functional's name
    ([T.format("addmm")], None, "torch.addmm"),
    ([T.format("arange"), "torch/utils/_device.py(99): __torch_function__", T.format("arange")], None, "torch.arange"),
    (["torch/_tensor.py(866): norm", "torch/functional.py(1700): norm", "<built-in function linalg_vector_norm>"],
     None, "Tensor.norm"),  # a torch-level call inside another is the outer one's
    (["<built-in function linalg_vector_norm>"], None, "torch.linalg.vector_norm"),
    (["<built-in function fft_rfft>"], None, "torch.fft.rfft"),
    (["<built-in method add of Tensor object at 0x7f>"], None, "Tensor.add"),
    (["<built-in method add_ of Parameter object at 0x7f>"], None, "Tensor.add_"),
    (["<method 'add' of 'torch._C.TensorBase' objects>"], None, "Tensor.add"),
    (["torch/_tensor.py(40): wrapped", "torch/_tensor.py(1000): __rsub__", T.format("rsub")], None, "Tensor.__rsub__"),
    (["torch/_jit_internal.py(624): fn", "torch/nn/functional.py(812): _max_pool2d", T.format("max_pool2d")],
     None, "max_pool2d"),  # boolean_dispatch's private target is its functional
    ([T.format("_foreach_copy_")], None, "aten::mm"),  # private: no call of its own
    (["<built-in method tolist of Tensor object at 0x7f>"], None, "aten::mm"),  # the recorder leaves it unscoped
    (["torch/cuda/graphs.py(139): replay"], None, "torch.cuda.CUDAGraph.replay"),
    (["<built-in function isinstance>", "threading.py(1032): _bootstrap"], None, "aten::mm"),
    (["nn.Module: A_0", "nn.Module: B_1", "x.py(1): f", "nn.Module: C_2"], "A_0.B_1.C_2", "aten::mm"),
]  # fmt: skip


@pytest.mark.parametrize(("frames", "module", "function"), FRAME_CASES, ids=lambda v: str(v)[:60])
def test_a_frame_stack_names_the_module_and_the_call_the_recorder_would(tmp_path, frames, module, function):
    assert _rows(_plain_trace(tmp_path, frames), check_reference=True) == {"aten::mm": (module, function)}


def test_a_kernelscope_recording_made_with_stack_keeps_its_own_scopes(tmp_path):
    frames = ["nn.Module: Other_0", "<built-in function gelu>"]
    assert _rows(_plain_trace(tmp_path, frames, scope="ks.fn:linear#0@encoder.fc")) == {
        "aten::mm": ("encoder.fc", "linear")
    }
    assert _rows(_plain_trace(tmp_path, frames, scope="probe:not_kernelscope")) == {"aten::mm": ("Other_0", "gelu")}


def test_frames_on_another_thread_hold_nothing(tmp_path):
    path = _plain_trace(tmp_path, ["nn.Module: Net_0", "<built-in function linear>"])
    trace = json.loads(path.read_text())
    for event in trace["traceEvents"]:
        if event["cat"] == "python_function":
            event["tid"] = 8
    path.write_text(json.dumps(trace))
    assert _rows(path) == {"aten::mm": (None, "aten::mm")}, "no module, no call frame: the operator's call"


def _unmodeled_mtia(tmp_path: Path) -> Path:
    """device_mtia.json (the H100 excerpt's device events filed as MTIA's, which kernelscope reads as kernels) with
    its device events under mtia_insight, a category of Kineto's that it does not attribute."""
    path = tmp_path / "device_mtia_insight.json"
    path.write_text((EXCERPTS / "device_mtia.json").read_text().replace('"mtia_ccp_events"', '"mtia_insight"'))
    return path


@pytest.mark.parametrize(
    ("name", "category"), [(None, "mtia_insight"), ("device_profiler_range.json", "cuda_profiler_range")]
)
def test_device_events_kernelscope_does_not_model_get_a_note(tmp_path, name, category):
    path = _unmodeled_mtia(tmp_path) if name is None else EXCERPTS / name
    with load_run(path) as run:
        notes = run.notes()
        cpu_rows = run.device == "cpu"
    assert len(notes) == 1 and "\n" not in notes[0]
    assert notes[0].startswith(f"{path}: holds device events that kernelscope does not attribute: ")
    assert f" {category} (" in notes[0]
    assert notes[0].endswith("whose rows are its leaf CPU operators") == cpu_rows == (name is None)


def test_mtia_on_device_events_are_read_as_kernels_without_a_note():
    with load_run(EXCERPTS / "device_mtia.json") as run:
        assert run.notes() == []
        kinds = set(run.sql("SELECT DISTINCT kind FROM kernels")["kind"])
    assert kinds == {"kernel"}


def test_the_traces_kernelscope_reads_whole_get_no_note():
    """Device events of the categories it reads (the whole traces: tests/test_sample_traces.py)."""
    for path in [EXCERPTS / "frames_h100.json", EXCERPTS / "hip_graph_sglang.json"]:
        with load_run(path) as run:
            assert run.notes() == [], path


# The command on plain traces: nothing silent.


def _cli(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelscope.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        **kwargs,
    )


def _misc_without(tmp_path: Path, keep, name: str) -> Path:
    """misc.json.gz (a plain H200 trace without Python frames) with only the events ``keep(event)`` holds, in a
    folder whose name is longer than any terminal."""
    trace = json.loads(gzip.decompress(MISC.read_bytes()))
    trace["traceEvents"] = [e for e in trace["traceEvents"] if keep(e)]
    path = tmp_path / ("a-long-directory-name-" * 8) / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(trace))
    return path


def test_a_trace_that_names_no_call_is_summarized_by_operator_whole_and_by_rank(tmp_path):
    """Without operators no launch is held by a call: time by op, whole and per rank, the title one line."""
    path = _misc_without(tmp_path, lambda e: e.get("cat") != "cpu_op", "no_operators.json")
    whole = CliRunner().invoke(main, ["analyze", str(path)])
    by_rank = CliRunner().invoke(main, ["analyze", str(path), "--by-rank", "--format", "csv"])
    assert whole.exit_code == by_rank.exit_code == 0
    title, *table = whole.output.splitlines()
    assert title == f"{path}: time by op (the trace names no call)", "one line, however long, when piped"
    assert "kernels" in table[1]
    header, *rows = by_rank.output.splitlines()
    assert header == "rank,op,kernels,time_spent_us,time_spent_pct" and rows
    assert {row.split(",")[0] for row in rows} == {"0"}


def test_the_rows_of_a_cpu_trace_are_counted_as_cpu_operators(tmp_path):
    path = _misc_without(tmp_path, lambda e: e.get("cat") in ("cpu_op", "user_annotation", None), "cpu_only.json")
    by_op = CliRunner().invoke(main, ["analyze", str(path), "--by", "op", "--format", "csv"])
    assert by_op.exit_code == 0, by_op.output
    assert by_op.output.splitlines()[0] == "op,cpu_operators,time_spent_us,time_spent_pct"
    device = CliRunner().invoke(main, ["analyze", str(MISC), "--by", "op", "--format", "csv"])
    assert device.output.splitlines()[0] == "op,kernels,time_spent_us,time_spent_pct"


@pytest.mark.parametrize("fmt", ["csv", "table"])
def test_output_piped_into_head_ends_quietly(fmt):
    """The reader closes the pipe after one line, long before the 558 rows are written."""
    trace = REPO / "sample_traces" / "external" / "tl_sglang_qwen3_decode.json.gz"
    command = [sys.executable, "-m", "kernelscope.cli", "analyze", str(trace), "--kernels", "--format", fmt]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
        assert child.stdout.readline()
        child.stdout.close()
        assert child.wait(timeout=120) == 0
        assert child.stderr.read() == b""


def test_a_note_goes_to_stderr_in_every_format(tmp_path):
    path = _unmodeled_mtia(tmp_path)
    done = _cli("analyze", path, "--format", "csv")
    assert done.returncode == 0 and done.stdout.startswith("function_name,")
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"kernelscope: note: {path}: holds device events ")
    assert "6 mtia_insight" in line


def test_a_trace_with_nothing_to_attribute_is_refused_before_the_attribution(tmp_path, monkeypatch):
    from kernelscope.analyzer import rank_parts
    from kernelscope.analyzer.errors import BadInputError

    path = _plain_trace(tmp_path, ["nn.Module: Net_0"])
    trace = json.loads(path.read_text())
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["cat"] not in ("kernel", "cpu_op")]
    path.write_text(json.dumps(trace))
    read = rank_parts.run_sql_file

    def no_attribution(con, name, **literals):
        assert name not in ("frames.sql", "attribution.sql"), "refusing costs no more than reading"
        return read(con, name, **literals)

    monkeypatch.setattr(rank_parts, "run_sql_file", no_attribution)
    with pytest.raises(BadInputError, match="holds no device events .* and no CPU operators$"):
        load_run(path)


def test_a_plain_with_stack_trace_names_the_calls_a_recording_names(demo_run, tmp_path):
    """The demo model, recorded by kernelscope and traced by a bare torch.profiler(with_stack=True) on the CPU: row by
    row, the same operators, and the same call wherever a frame names one; the rest are Python operators (x + y),
    which make no frame: their calls are named after their
    operators. Each chain of module frames is one recorded module (attribute path)."""
    torch = pytest.importorskip("torch")
    _, model, samples, recorded, _, _ = demo_run
    with torch.no_grad():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True) as profiler:
            for args, kwargs in samples:
                model(*args, **kwargs)
    profiler.export_chrome_trace(str(tmp_path / "plain.json"))
    with load_run(tmp_path / "plain.json") as run:
        plain = run.profiling_df()
    assert list(plain["op"]) == list(recorded["op"])
    pairs = list(zip(recorded["function_name"], plain["function_name"], strict=True))
    from_frames = [(theirs, mine) for theirs, mine in pairs if "::" not in mine]
    assert from_frames and all(mine == theirs for theirs, mine in from_frames)
    no_frame = {theirs for theirs, mine in pairs if "::" in mine}  # named after their operator (aten::add)
    assert no_frame and all(name.startswith("Tensor.__") for name in no_frame), no_frame
    modules = set(zip(recorded["module_name"], plain["module_name"], strict=True))
    assert len({chain for _, chain in modules}) == len(modules), "each chain is one recorded module"
    unscoped = {chain for _, chain in modules} - {min(c for m, c in modules if m == module) for module, _ in modules}
    assert unscoped and all(chain.rpartition(".")[2].startswith("Dropout_") for chain in unscoped), (
        "the recorder gives dropout in eval mode no scope: its CPU operator is its parent's there"
    )
    assert ("encoder.self_attn", "DemoModel_0.TransformerEncoderLayer_0.MultiheadAttention_0") in modules


LAUNCHES = {  # every runtime call of the ROCm traces of sample_traces/external/, CUDA's launches, and near misses
    "kernel": ["hipLaunchKernel", "hipExtModuleLaunchKernel", "hipModuleLaunchKernel", "hipExtLaunchKernel",
               "hipLaunchCooperativeKernel", "hipExtLaunchMultiKernelMultiDevice", "cudaLaunchKernel",
               "cudaLaunchKernelExC", "cudaLaunchKernel_ptsz", "cuLaunchKernel", "cuLaunchKernelEx",
               "cudaLaunchCooperativeKernel", "cuLaunchCooperativeKernel"],
    "graph": ["hipGraphLaunch", "cudaGraphLaunch", "cuGraphLaunch", "cudaGraphLaunch_ptsz", "hipGraphLaunch_spt"],
    "neither": ["hipGetDevicePropertiesR0600", "hipStreamGetDevice", "hipDeviceSynchronize", "hipMemcpyWithStream",
                "hipPointerGetAttribute", "hipDeviceGetAttribute", "hipMemcpyAsync", "hipStreamWaitEvent",
                "hipEventDestroy", "hipStreamGetCaptureInfo", "hipStreamIsCapturing", "hipDriverGetVersion",
                "cudaLaunchHostFunc", "hipLaunchHostFunc", "cudaFuncSetAttribute", "cudaGraphKernelNodeSetParams",
                "hipKernelNameRef", "cudaMemsetAsync", "hipMemsetAsync", "aten::launch_kernel"],
}  # fmt: skip


def test_launch_rules_read_cuda_and_rocm_names_by_their_shape():
    import duckdb
    from kernelscope.analyzer.sql import define_scope_names

    con = duckdb.connect()
    define_scope_names(con, "ks.module:", "ks.fn:")
    shapes = {"kernel": (True, False), "graph": (False, True), "neither": (False, False)}
    for expected, names in LAUNCHES.items():
        for name in names:
            assert (
                con.execute("SELECT ks_kernel_launch(?), ks_graph_launch(?)", [name, name]).fetchone()
                == shapes[expected]
            ), name


def _operator_trace(tmp_path: Path, operators: list[str]) -> Path:
    """A trace whose one kernel is launched inside ``operators`` (cpu_op events, outermost first, each holding
    the next), with no scope or frame around them."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": op, "pid": 7, "tid": 7, "ts": 10 + n, "dur": 100 - 2 * n, "args": {}}
        for n, op in enumerate(operators)
    ]
    events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7,
                   "ts": 10 + len(operators), "dur": 1, "args": {"correlation": 5}})  # fmt: skip
    events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 200, "dur": 3,
                   "args": {"correlation": 5, "device": 0, "stream": 7}})  # fmt: skip
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize(
    ("operators", "call"),
    [
        (["forward", "aten::linear", "aten::addmm"], "aten::linear"),  # TorchScript: its method, then the ops
        (["FusedFunction", "mylib::fused", "aten::mm"], "mylib::fused"),  # an autograd Function's operator
        (["CudnnConvolutionBackward", "aten::cudnn_convolution_backward"], "aten::cudnn_convolution_backward"),
        (["FusedFunction"], "(other operator)"),  # a kernel its extension launched itself
        (["aten::linear", "aten::addmm"], "aten::linear"),
    ],
    ids=lambda v: str(v)[:40],
)
def test_work_outside_any_call_is_named_after_its_outermost_operator_with_a_namespace(tmp_path, operators, call):
    path = _operator_trace(tmp_path, operators)
    with load_run(path) as run:
        assert_matches_reference(run, path)
        (row,) = run.profiling_df().itertuples()
    assert (row.function_name, row.call_op, row.op) == (call, operators[0], operators[-1])


def test_a_2021_training_trace_names_its_backward_and_optimizer_kernels_after_their_operators():
    path = REPO / "sample_traces" / "external" / "kineto_resnet50_autograd_api_2021-02.pt.trace.json.gz"
    with load_run(path) as run:
        frame = run.profiling_df()
    by_call = frame.groupby("function_name")["kernel_us"].sum()
    assert "(other operator)" not in by_call.index, "62 % of its device time was, under backward nodes' operators"
    assert by_call["aten::cudnn_convolution_backward"] > 0.4 * by_call.sum()
