"""Threads and the recording: the calls of the thread that runs the pass and of the threads the model starts are
scoped and sampled; a thread the model did not start (a server's) runs the original functions meanwhile, so its
calls are never samples of the pass and never race with their keying."""

import _thread
import contextlib
import contextvars
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder import profiler as recorder_profiler  # noqa: E402
from kernelscope.recorder import threads as recorder_threads  # noqa: E402
from torch import nn  # noqa: E402


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.tanh(F.relu(self.fc(x)) + 1)


class Hammer:
    """A daemon thread making torch calls in a loop (F.relu, torch.tanh, x + 1: functions the model calls too)
    while it runs; with a tiny switch interval the interpreter changes threads inside the recorder's keying.
    Within ``paused()`` it makes none."""

    def __init__(self):
        self.turn = threading.Condition()
        self.pauses, self.busy = 0, False
        self.stop = threading.Event()
        self.calls = 0
        self.errors = []  # what the recorder raised in this thread, which it never should
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        x = torch.randn(4)
        while not self.stop.is_set():
            with self.turn:
                self.turn.wait_for(lambda: not self.pauses)
                self.busy = True
            try:
                F.relu(x)
                torch.tanh(x)
                x + 1  # noqa: B018 (Tensor.__add__, a torch-level call)
            except Exception as error:  # noqa: BLE001 (counted, and the loop goes on as a server's would)
                self.errors.append(error)
            with self.turn:
                self.busy = False
                self.turn.notify_all()
            self.calls += 1

    @contextlib.contextmanager
    def paused(self):
        with self.turn:
            self.pauses += 1
            self.turn.wait_for(lambda: not self.busy)
        try:
            yield
        finally:
            with self.turn:
                self.pauses -= 1
                self.turn.notify_all()

    def __enter__(self):
        self.interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)
        sys.setswitchinterval(self.interval)


def test_a_thread_the_model_did_not_start_is_not_part_of_the_recording(tmp_path, monkeypatch):
    model = Small().eval()
    samples = [((torch.randn(2, 8),), {}), ((torch.randn(3, 8),), {})]
    with Hammer() as hammer, warnings.catch_warnings():
        monkeypatch.setattr(recorder_profiler, "profile", _pausing(hammer))
        warnings.simplefilter("error")  # a pass keyed again (the model's calls seemed to differ) warns
        for attempt in range(2):  # without the thread check every attempt failed (samples of the other thread)
            profiler = ModuleFunctionKernelProfiler()
            frame, data = profiler.profile(model, samples, warmup_iterations=3, out=tmp_path / f"run{attempt}")
            assert profiler.run.manifest["sample_keys"] == "predicted"
            assert {name: [calls for calls, _ in entries] for name, entries in data.items()} == {
                "linear": [1, 1],
                "relu": [1, 1],
                "Tensor.__add__": [1, 1],
                "torch.tanh": [1, 1],
            }, "only the model's calls are samples of its pass"
            other = frame[frame["thread"] != frame["thread"][frame["module_name"].notna()].iloc[0]]
            assert other["function_name"].isin(["relu", "torch.tanh", "Tensor.__add__"]).sum() == 0, "unscoped"
            profiler.release()
    assert hammer.calls > 0, "the other thread ran its torch calls meanwhile"
    assert hammer.errors == []


def _pausing(hammer: Hammer) -> type:
    """torch.profiler.profile that holds the hammer off while it starts and stops: torch's profile_all_threads
    crashes the process, now and then, when another thread runs an operator then (torch.profiler alone does too)."""

    class Pausing(torch.profiler.profile):
        def __enter__(self):
            with hammer.paused():
                return super().__enter__()

        def __exit__(self, *exc):
            with hammer.paused():
                return super().__exit__(*exc)

    return Pausing


class StartsThreads(nn.Module):
    """Calls on threads of its own: a pool it makes at its first call (an unscoped warm-up pass), and a thread it
    starts in every pass that starts one more."""

    def __init__(self):
        super().__init__()
        self.pool = None

    def forward(self, x):
        if self.pool is None:
            self.pool = ThreadPoolExecutor(1)
        g = self.pool.submit(F.gelu, x).result()
        out = {}

        def outer():
            inner = threading.Thread(target=lambda: out.update(s=F.silu(x)))
            inner.start()
            inner.join()

        thread = threading.Thread(target=outer)
        thread.start()
        thread.join()
        return F.relu(g + out["s"])


def test_the_threads_the_model_starts_are_scoped(tmp_path):
    model = StartsThreads()
    start = vars(threading.Thread)["start"]
    try:
        profiler = ModuleFunctionKernelProfiler()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            frame, data = profiler.profile(model, [((torch.randn(4, 4),), {})], out=tmp_path / "run")
    finally:
        model.pool.shutdown()
    assert profiler.run.manifest["sample_keys"] == "predicted"
    assert {name: [calls for calls, _ in entries] for name, entries in data.items()} == {
        "gelu": [1],
        "silu": [1],
        "Tensor.__add__": [1],
        "relu": [1],
    }
    assert {"gelu", "silu"} <= set(frame["function_name"]), "their kernels are their calls'"
    assert vars(threading.Thread)["start"] is start, "Thread.start is put back"


class StartsLowLevelThreads(nn.Module):
    """Calls on a thread it starts with ``_thread.start_new_thread`` (or its alias ``starter``), as code below
    threading does, in every pass."""

    def __init__(self, starter: str = "start_new_thread"):
        super().__init__()
        self.starter = starter

    def forward(self, x):
        out, done = {}, threading.Event()

        def work(y, *, scale):
            try:
                out["g"] = F.gelu(y * scale)
            finally:
                done.set()

        getattr(_thread, self.starter)(work, (x,), {"scale": 2})
        assert done.wait(10), "the thread ran"
        return F.relu(out["g"])


@pytest.mark.parametrize("starter", [name for name in ("start_new_thread", "start_new") if name in vars(_thread)])
def test_the_threads_the_model_starts_with_thread_start_new_thread_are_scoped(tmp_path, starter):
    start_new_thread, alias = _thread.start_new_thread, vars(_thread).get("start_new")
    profiler = ModuleFunctionKernelProfiler()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = StartsLowLevelThreads(starter)
        frame, data = profiler.profile(model, [((torch.randn(4, 4),), {})], out=tmp_path / "run")
    assert {name: [calls for calls, _ in entries] for name, entries in data.items()} == {
        "Tensor.__mul__": [1],
        "gelu": [1],
        "relu": [1],
    }, "the thread's calls are samples of the pass"
    assert "gelu" in set(frame["function_name"]), "its kernels are its call's"
    assert _thread.start_new_thread is start_new_thread, "_thread.start_new_thread is put back"
    assert vars(_thread).get("start_new") is alias
    with pytest.raises(TypeError, match="must be a tuple"):  # the original's checks, unchanged while in place
        with recorder_threads.model_threads():
            _thread.start_new_thread(print, [1])
    assert _thread.start_new_thread is start_new_thread


def test_a_pool_made_before_the_recording_is_not_the_model_s(tmp_path):
    """Its threads were started by no thread of the recording, so their calls are not the pass's (docs/recording.md)."""
    model = StartsThreads()
    model.pool = ThreadPoolExecutor(1)
    model.pool.submit(int).result()  # its thread is started now
    try:
        _, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 4),), {})], out=tmp_path / "run")
    finally:
        model.pool.shutdown()
    assert "gelu" not in data and {"silu", "relu"} <= data.keys()


def test_thread_start_is_put_back_when_the_model_raises():
    class Raises(nn.Module):
        def forward(self, x):
            raise ValueError("the model's own error")

    start, start_new_thread = vars(threading.Thread)["start"], _thread.start_new_thread
    with pytest.raises(ValueError, match="the model's own error"):
        ModuleFunctionKernelProfiler().profile(Raises(), [((torch.randn(2),), {})])
    assert vars(threading.Thread)["start"] is start and _thread.start_new_thread is start_new_thread


_SAVED_CONTEXT = contextvars.copy_context()  # made at import, before any recording


class RunsInASavedContext(nn.Module):
    def __init__(self):
        super().__init__()
        self.child, self.head = Small(), nn.Linear(8, 8)

    def forward(self, x):
        return F.silu(self.head(_SAVED_CONTEXT.copy().run(self.child, x)))


def test_a_child_run_in_a_context_saved_before_the_recording_is_scoped_and_sampled():
    """Its context holds the defaults of the recording's context variables (a thread the recording leaves alone):
    the child's calls were run unscoped, their kernels named after their operators in the parent's module."""
    before = set(recorder_threads.SCOPED_THREADS)  # threads an earlier test's model started, alive: scoped for life
    frame, data = ModuleFunctionKernelProfiler().profile(RunsInASavedContext().eval(), [((torch.randn(4, 8),), {})],
                                                         warmup_iterations=1)  # fmt: skip
    assert set(frame.loc[frame["function_name"] == "relu", "module_name"]) == {"child"}
    assert set(frame.loc[frame["function_name"] == "linear", "module_name"]) == {"child.fc", "head"}
    assert [calls for calls, _ in data["relu"]] == [1] and [calls for calls, _ in data["silu"]] == [1]
    assert recorder_threads.SCOPED_THREADS == before, "no thread is left marked scoped by this recording"
