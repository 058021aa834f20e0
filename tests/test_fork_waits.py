"""Waits on a device as Kineto's forks name them: Moore Threads' fork (MooreThreads/kineto, ActivityType.cpp) writes
its device-side synchronisations as musa_sync where Kineto writes cuda_sync (and XPU's plugin xpu_sync). A wait is no
work of its own: no note names it as device events kernelscope does not attribute (unmodeled.sql), whatever the
device's name before _sync."""

import json

import pytest
from conftest import TESTS
from kernelscope.analyzer import load_run

EXCERPT = TESTS / "data" / "excerpts" / "frames_h100.json"


@pytest.mark.parametrize("category", ["cuda_sync", "xpu_sync", "musa_sync", "mlu_sync"])
def test_a_wait_on_the_device_of_any_fork_gets_no_note(tmp_path, category):
    doc = json.loads(EXCERPT.read_text())
    events = doc["traceEvents"]
    kernel = next(e for e in events if e.get("cat") == "kernel")
    wait = {"ph": "X", "cat": category, "name": "Event Sync", "pid": kernel["pid"], "tid": kernel["tid"],
            "ts": kernel["ts"] + kernel["dur"], "dur": 1.0, "args": {"device": 0, "stream": kernel["tid"]}}  # fmt: skip
    path = tmp_path / f"{category}.json"
    path.write_text(json.dumps({**doc, "traceEvents": [*events, wait]}))
    with load_run(path) as run:
        assert run.notes() == []
