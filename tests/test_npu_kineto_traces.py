"""A torch_npu trace in Kineto's own format (tests/data/wild/torch_npu_msprof_backward.json, cut from the one MindStudio
Insight tests with): Ascend tasks as "kernel" events on the device's pid and stream, no correlation or External id
anywhere, each task's "privateuse1_runtime" call (0 µs, at the task's own start) joined to it by an ac2g flow only, and
the tasks the writer linked to no call given the id of an earlier flow (1 here) over and over."""

import json

import pandas as pd
from conftest import TESTS, assert_rows_as_original
from kernelscope.analyzer import load_run
from reference import assert_matches_reference

EXCERPT = TESTS / "data" / "wild" / "torch_npu_msprof_backward.json"
MAIN, AUTOGRAD = 3466812, 3467863  # the Python thread, and the autograd engine's (pt_autograd_0)


def test_every_task_is_a_row_on_its_stream():
    """(tests/test_wild_excerpts.py checks every row against the reference.)"""
    with load_run(EXCERPT) as run:
        frame = run.profiling_df()
        assert len(frame) == 12 and set(frame["kind"]) == {"kernel"}
        assert round(frame["kernel_us"].sum(), 3) == 99.02
        assert set(frame["stream"]) == {47} and set(frame["device"]) == {0}
        # the backward's tasks whose call the trace has, on the autograd thread inside its operators
        ones = frame[frame["kernel"].str.startswith("OnesLike") & (frame["thread"] == AUTOGRAD)]
        assert list(ones["op"]) == ["aten::nll_loss_backward"]


def test_a_flow_id_the_writer_reuses_places_no_task_after_a_task_launched_later():
    """Flow 1 starts once, at the forward's LogSoftmaxV2 call on the Python thread, and finishes on that task and on
    every later task the writer linked to no call: the four that follow it on the stream may be a fan-out of that call
    (as a CUDA graph's kernels are of their launch) and stay there; a task that runs after one launched later on its
    stream (Cast after the backward's OnesLike, ReduceSum after its MatMulV2) cannot have been launched before that
    one (a stream runs its work in launch order): its launch is unknown, not the forward's."""
    with load_run(EXCERPT) as run:
        frame = run.profiling_df()
    threads = {}  # task name (before its hash) -> the threads of its calls, in order
    for row in frame.itertuples():
        threads.setdefault(row.kernel.split("_")[0], []).append(None if row.thread is pd.NA else row.thread)
    assert threads["LogSoftmaxV2"] == threads["MemSet"] == threads["NLLLoss"] == threads["Fill"] == [MAIN]
    assert threads["OnesLike"] == [MAIN, AUTOGRAD]
    assert threads["Cast"] == threads["ReduceSum"] == [None]
    assert threads["NLLLossGrad"] == threads["LogSoftmaxGrad"] == [AUTOGRAD]
    assert threads["MatMulV2"] == [AUTOGRAD, AUTOGRAD]


def test_a_note_says_the_calls_sit_at_their_tasks_device_start():
    """The export files each task's call (0 µs, the task's name) at the task's own start on the device, so a row's
    operator is the one running on the launching thread then, which lags the one that dispatched it: a note says so,
    where a trace whose launches precede their device events (all of Kineto's CUDA and ROCm ones) gets none."""
    with load_run(EXCERPT) as run:
        notes = run.notes()
    assert notes == [
        f"{EXCERPT}: 6 of its 12 device events have a runtime call of their own name that lasts 0 µs and starts when"
        " they do (a writer that files each call at its device event's start, as torch_npu's Kineto export): their"
        " operators are those running on the calling thread then, which may come after the one that launched them"
    ]
    with load_run(TESTS / "data" / "wild" / "gpumodel_a100_mm.json") as run:
        assert run.notes() == []


def test_its_flows_written_without_a_category_read_the_same(tmp_path):
    """A flow's start and finishes match by id and category, an absent category being one too (as a writer that drops
    "cat" from its flows writes them): the trace so written gives the same rows, the two tasks after later launches
    without a launch, and the reference agrees."""
    doc = json.loads(EXCERPT.read_text())
    for event in doc["traceEvents"]:
        if event.get("cat") == "ac2g":
            del event["cat"]
    path = tmp_path / "flows_without_cat.json"
    path.write_text(json.dumps(doc))
    with load_run(EXCERPT) as original, load_run(path) as run:
        assert_matches_reference(run, path)
        assert_rows_as_original(run, original)
        assert run.profiling_df()["thread"].isna().sum() == 2
