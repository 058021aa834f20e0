"""The recorded pass's sample ids predicted from the warm-up whatever the order in which the threads of a model's
thread pool make their calls (recorder/predictions.py), and a warning that says so where the threads' order is all
that told their calls apart."""

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from unittest import mock

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder import profiler as recorder_profiler  # noqa: E402
from kernelscope.recorder.retention import CappedSampleBook  # noqa: E402
from torch import nn  # noqa: E402


class Turns:
    """Makes the threads of one pass take their turns in the order ``schedule`` gives (a list of thread numbers)."""

    def __init__(self, schedule: list[int]) -> None:
        self.schedule, self.done, self.condition = schedule, 0, threading.Condition()

    def take(self, me: int, call, *args):
        with self.condition:
            assert self.condition.wait_for(lambda: self.schedule[self.done] == me, timeout=30), "a turn never came"
        try:
            return call(*args)
        finally:
            with self.condition:
                self.done += 1
                self.condition.notify_all()


class Head(nn.Module):
    """Two calls, each in its turn: linear, then the sum of the output and an index the head makes per pass (an
    ``__index__`` object: keyed by its identity, a new one in every pass)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width, 4))

    def forward(self, x, turns: Turns, me: int):
        index = Index()
        h = turns.take(me, F.linear, x, self.weight)
        return turns.take(me, torch.Tensor.__getitem__, h, index)


class Index:
    def __index__(self) -> int:
        return 0


class TakesTurns(nn.Module):
    """Heads run on the threads of a pool made in the forward, their calls in the order of the pass's schedule."""

    def __init__(self, widths: list[int], schedules: list[list[int]]) -> None:
        super().__init__()
        self.heads = nn.ModuleList(Head(width) for width in widths)
        self.schedules, self.passes = schedules, 0

    def forward(self, x):
        turns = Turns(self.schedules[self.passes % len(self.schedules)])
        self.passes += 1
        with ThreadPoolExecutor(len(self.heads)) as pool:
            return list(pool.map(lambda me: self.heads[me](x, turns, me), range(len(self.heads))))


def _profile(model, tmp_path, name, hold_limit=None, **options):
    """profile() with a keyed warm-up and the recorded pass right after it (warmup_iterations=2)."""
    profiler = ModuleFunctionKernelProfiler(**options)
    with (
        mock.patch.object(recorder_profiler, "hold_limit_bytes", lambda *_: hold_limit)
        if hold_limit == 0
        else nullcontext()
    ):
        frame, _ = profiler.profile(model, [((torch.randn(3, 4),), {})], warmup_iterations=2, out=tmp_path / name)
    return profiler, frame


def _rows_with_their_samples(profiler, frame) -> list[tuple]:
    """(module, function, its sample's tensor shapes) of each row of a sampled call, sorted."""
    metadata = profiler.book.metadata()
    rows = frame[frame["sample_id"].notna()]
    shapes = {
        (function, entry["sample_id"]): [arg["tensor"]["shape"] for arg in entry["args"]["tuple"] if "tensor" in arg]
        for function, entries in metadata.items()
        for entry in entries
    }
    return sorted(
        (module, function, shapes[function, int(sample_id)])
        for module, function, sample_id in zip(
            rows["module_name"], rows["function_name"], rows["sample_id"], strict=True
        )
    )


# Pass 2 (the keyed warm-up) runs head 0's calls first, pass 3 (recorded) head 1's, then head 0's: every linear
# call comes at another position among linear's calls, and linear's two signatures are first seen in the other order.
HEAD_ONE_FIRST = [[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 0, 0]]


@pytest.mark.parametrize("cap_mb", [None, 200 / 2**20], ids=["kept", "capped"])
def test_calls_of_a_thread_pool_in_another_order_are_predicted(tmp_path, cap_mb):
    model = TakesTurns([8, 16], HEAD_ONE_FIRST)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*were not kept")
        profiler, frame = _profile(model, tmp_path, "predicted", sample_memory_limit_mb=cap_mb)
    assert profiler.run.manifest["sample_keys"] == "predicted" and model.passes == 3
    metadata = profiler.book.metadata()
    weights = [entry["args"]["tuple"][1]["tensor"]["shape"] for entry in metadata["linear"]]
    assert weights == [[8, 4], [16, 4]], "the warm-up's numbering"
    if cap_mb is not None:  # 200 bytes: x (48) and the 8-wide h (96) are kept, not the 16-wide (192): its id 1
        assert profiler.book.not_kept == {"Tensor.__getitem__": {1}}
        [(_, ((kept, _), _)), (_, ((not_kept, _), _))] = profiler.book.function_data()["Tensor.__getitem__"]
        assert isinstance(kept, torch.Tensor) and kept.shape == (3, 8) and not isinstance(not_kept, torch.Tensor)

    per_call = TakesTurns([8, 16], HEAD_ONE_FIRST)
    per_call.load_state_dict(model.state_dict())
    reference = _profile(per_call, tmp_path, "per_call", hold_limit=0, sample_memory_limit_mb=cap_mb)
    assert reference[0].run.manifest["sample_keys"] == "per_call"
    assert _rows_with_their_samples(profiler, frame) == _rows_with_their_samples(*reference)


def test_a_wrong_prediction_from_the_threads_order_says_so(tmp_path):
    """Each head indexes twice by its own object, made anew in every pass: nothing but the threads' order tells the
    two heads' calls apart, and that order changes."""
    model = TakesTurns([8, 8], [[0, 0, 1, 1], [0, 0, 1, 1], [0, 1, 0, 1]])
    model.heads[1].forward = lambda x, turns, me, head=model.heads[1]: _indexes_twice(head, x, turns, me)
    model.heads[0].forward = lambda x, turns, me, head=model.heads[0]: _indexes_twice(head, x, turns, me)
    with pytest.warns(RuntimeWarning, match="calls from several threads came in another order") as caught:
        profiler, _ = _profile(model, tmp_path, "run")
    assert not any("in place" in str(warning.message) for warning in caught)
    assert profiler.run.manifest["sample_keys"] == "per_call_after_miss"


def _indexes_twice(head, x, turns, me):
    index = Index()
    turns.take(me, torch.Tensor.__getitem__, x, index)
    return turns.take(me, torch.Tensor.__getitem__, x, index)


def test_renumbering_keeps_each_signature_with_its_calls_and_samples():
    book = CappedSampleBook(None)
    record = book.recorder("f")
    a, b = torch.randn(2), torch.randn(3)
    book.watch_warm_up()
    for x in (a, b, b):
        record((x,), {})
    assert book.predict_next_pass()
    ids = []
    worker = threading.Thread(target=lambda: ids.extend(record((x,), {}) for x in (b, b, a)))
    worker.start()
    worker.join()
    assert ids == [1, 1, 0], "looked up by key: the warm-up's ids"
    assert book.confirm_predictions()
    assert [(calls, args[0].shape) for calls, (args, _) in book.function_data()["f"]] == [(1, (2,)), (2, (3,))]
