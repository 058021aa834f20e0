"""Traces of Ascend NPUs (torch_npu's profiler, msprof: trace_view.json), built in the shape torch_npu writes them
(torch_npu/profiler/analysis/prof_common_func/_trace_event_manager.py and the CANN timeline it merges): a bare array
of events, ts as strings, tasks without a category on the process named "Ascend Hardware", linked to the operator
that dispatched them by an "async_npu" flow, and to their CANN API call by a "HostToDevice" one."""

import json

from kernelscope.analyzer import load_run
from reference import assert_matches_reference

PYTHON, CANN, NPU = 2287318, 2342213663, 2342213696  # torch_npu's pids: the process's, then (pid << 10) | … | device
THREAD = 2287318
T0 = 1699529623106000  # epoch µs


def _ts(us: float) -> str:
    return f"{T0 + us:.3f}"  # torch_npu writes ts as a string of microseconds with 3 decimals


def _op(name: str, at: float, dur: float) -> dict:
    args = {"Sequence number": -1, "Fwd thread id": 0}
    return {
        "ph": "X",
        "name": name,
        "pid": PYTHON,
        "tid": THREAD,
        "ts": _ts(at),
        "dur": dur,
        "cat": "cpu_op",
        "args": args,
    }


def _task(name: str, stream: int, at: float, dur: float, task_type: str, connection: int) -> dict:
    args = {"Model Id": 4294967295, "Task Type": task_type, "Stream Id": stream, "Task Id": connection, "Batch Id": 0,
            "Subtask Id": 4294967295, "connection_id": connection}  # fmt: skip
    return {"ph": "X", "name": name, "pid": NPU, "tid": stream, "ts": _ts(at), "dur": dur, "args": args}


def _flow(cat: str, name: str, flow_id, start: dict, finish: dict) -> list[dict]:
    ends = [("s", start), ("f", finish)]
    flow = {"bp": "e", "name": name, "id": flow_id, "cat": cat}
    return [{"ph": ph, **flow, "pid": e["pid"], "tid": e["tid"], "ts": e["ts"]} for ph, e in ends]


def ascend_trace() -> list[dict]:
    """aten::linear (holding aten::addmm), aten::relu and aten::copy_ on the Python thread; their tasks on two
    streams (a cube kernel, a vector kernel, a host-to-device copy), an event wait and a Step Trace iteration."""
    linear, addmm, relu, copy = (
        _op("aten::linear", 0, 40),
        _op("aten::addmm", 5, 30),
        _op("aten::relu", 50, 10),
        _op("aten::copy_", 70, 20),
    )
    api = {"Thread Id": THREAD, "Mode": "ACL_OP", "level": "acl", "id": "aclnnAddmm", "connection_id": 11}
    acl = {"ph": "X", "name": "AscendCL@aclnnAddmm", "pid": CANN, "tid": THREAD, "ts": _ts(10), "dur": 8, "args": api}
    mm = _task("aclnnAddmm_MatMulV3_MatMulV3", 2, 100, 12.5, "AI_CORE", 11)
    act = _task("aclnnRelu_ReluAiCore_Relu", 2, 120, 3.25, "AI_VECTOR_CORE", 12)
    h2d = _task("MEMCPY_ASYNC", 7, 130, 6, "MEMCPY_ASYNC", 13)
    wait = _task("EVENT_WAIT", 7, 124, 5.5, "EVENT_WAIT", 14)
    step = {"ph": "X", "name": "Iteration 1", "pid": NPU, "tid": 70001, "ts": _ts(95), "dur": 60, "args": {}}
    meta = [
        {"ph": "M", "name": "process_name", "pid": PYTHON, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_labels", "pid": PYTHON, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "thread_name", "pid": PYTHON, "tid": THREAD, "args": {"name": f"Thread {THREAD}"}},
        {"ph": "M", "name": "process_name", "pid": CANN, "tid": 0, "args": {"name": "CANN"}},
        {"ph": "M", "name": "process_name", "pid": NPU, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_labels", "pid": NPU, "tid": 0, "args": {"labels": "NPU"}},
        {"ph": "M", "name": "thread_name", "pid": NPU, "tid": 70001, "args": {"name": "Step Trace(Model ID:1)"}},
    ]
    flows = [
        *_flow("async_npu", "torch_to_npu", 1, addmm, mm),
        *_flow("HostToDevice", "HostToDevice11", "11", acl, mm),  # CANN's, from its API call: no operator holds it
        *_flow("async_npu", "torch_to_npu", 2, relu, act),
        *_flow("async_npu", "torch_to_npu", 3, copy, h2d),
    ]
    return [*meta, linear, addmm, relu, copy, acl, mm, act, wait, h2d, step, *flows]


def test_an_ascend_trace_s_tasks_are_its_device_events_named_after_the_operators_that_dispatched_them(tmp_path):
    """Its tasks were read as nothing (a CPU operator trace, the NPU's time unreported): each is a row of the
    operator its async_npu flow starts at; its event wait and Step Trace iteration are no device work."""
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(ascend_trace()))
    with load_run(path) as run:
        assert_matches_reference(run, path)
        frame = run.profiling_df().sort_values("start_us")
        assert list(frame["kernel"]) == ["aclnnAddmm_MatMulV3_MatMulV3", "aclnnRelu_ReluAiCore_Relu", "MEMCPY_ASYNC"]
        assert list(frame["kind"]) == ["kernel", "kernel", "memcpy"]
        assert list(frame["op"]) == ["aten::addmm", "aten::relu", "aten::copy_"]
        assert list(frame["call_op"]) == ["aten::linear", "aten::relu", "aten::copy_"]
        assert list(frame["stream"]) == [2, 2, 7]
        assert frame["kernel_us"].sum() == 21.75
        check = run.launch_check()
        assert (check.launches, check.device_events, check.device_events_without_launch) == (0, 3, 0)


def test_an_ascend_task_without_a_flow_is_a_device_event_in_no_call(tmp_path):
    """A task whose flow the trace lacks (torch_npu matched no operator to it) keeps its row and time, in no call,
    and the launch check counts it."""
    events = [e for e in ascend_trace() if not (e.get("cat") == "async_npu" and e.get("id") == 2)]
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with load_run(path) as run:
        assert_matches_reference(run, path)
        frame = run.profiling_df().set_index("kernel")
        assert frame.loc["aclnnRelu_ReluAiCore_Relu", "op"] is None
        assert frame.loc["aclnnAddmm_MatMulV3_MatMulV3", "op"] == "aten::addmm"
        assert run.launch_check().device_events_without_launch == 1
