"""torch.autograd.profiler's traces: its profile().export_chrome_trace writes a Kineto trace (in torch 2.13 with
use_kineto=False too, on the CPU), which loads; its legacy exporter (EventList.export_chrome_trace: torch's legacy
profiler, and function_events later) writes events no rule can attribute, and is refused saying so."""

import json

import pytest
from click.testing import CliRunner
from kernelscope.analyzer import load_run
from kernelscope.analyzer.errors import BadInputError
from kernelscope.cli import main

LEGACY = (
    "is a trace of torch.autograd.profiler's legacy exporter (EventList.export_chrome_trace: events of pid \"CPU"
    ' functions" without categories, correlations or External ids), which kernelscope cannot attribute: export the'
    " profile with torch.profiler.profile()'s export_chrome_trace"
)
# what the legacy exporter writes for an operator that ran a kernel (torch 1.x: the kernel as "CUDA functions")
LEGACY_EVENTS = [
    {"name": "aten::addmm", "ph": "X", "ts": 1537.3, "dur": 19.1, "tid": 1, "pid": "CPU functions", "args": {}},
    {"name": "aten::addmm", "ph": "s", "ts": 1537.3, "tid": 1, "pid": "CPU functions", "id": 0, "cat": "cpu_to_cuda",
     "args": {}},
    {"name": "gemm", "ph": "f", "ts": 1545.0, "tid": 0, "pid": "CUDA functions", "id": 0, "cat": "cpu_to_cuda",
     "args": {}},
    {"name": "gemm", "ph": "X", "ts": 1545.0, "dur": 4.0, "tid": 0, "pid": "CUDA functions", "args": {}},
]  # fmt: skip


@pytest.mark.parametrize("allow_empty", [False, True])
def test_a_legacy_export_is_refused_saying_what_it_is_and_what_to_do(tmp_path, allow_empty):
    path = tmp_path / "legacy.json"
    path.write_text(json.dumps(LEGACY_EVENTS))
    with pytest.raises(BadInputError) as raised:
        load_run(path, allow_empty=allow_empty)
    assert str(raised.value) == f"{path}: {LEGACY}"
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"kernelscope: error: {path}: {LEGACY}\n")


def test_a_bare_array_of_kineto_events_is_no_legacy_export(tmp_path):
    """The Chrome format's bare array of events loads, categories and all; a "CPU functions" process name alone
    does not make it legacy."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "args": {}},
        {"ph": "M", "name": "process_name", "pid": "CPU functions", "tid": 0, "args": {"name": "CPU functions"}},
    ]
    path = tmp_path / "array.json"
    path.write_text(json.dumps(events))
    with load_run(path) as run:
        assert run.profiling_df()["op"].tolist() == ["aten::mm"]


def test_torch_s_own_exports_of_an_autograd_profile_load_or_are_refused(tmp_path):
    torch = pytest.importorskip("torch")
    model, x = torch.nn.Linear(8, 8), torch.randn(4, 8)
    with torch.autograd.profiler.profile(use_kineto=False) as prof:
        model(x).relu()
    prof.export_chrome_trace(str(tmp_path / "profile.json"))
    prof.function_events.export_chrome_trace(str(tmp_path / "events.json"))
    with load_run(tmp_path / "profile.json") as run:
        assert run.device == "cpu" and {"aten::addmm", "aten::relu"} <= set(run.profiling_df()["op"])
    with pytest.raises(BadInputError, match="legacy exporter"):
        load_run(tmp_path / "events.json")
