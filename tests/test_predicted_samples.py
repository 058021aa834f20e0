"""Sample ids predicted from the warm-up and keyed after the recorded pass (SampleBook, profiler.record_pass)
give exactly what keying each call as it is made gives; a model whose calls differ between passes is
caught and recorded again, keyed per call. A call whose inputs the model reshapes in place after it (``h.t_()``,
``Tensor.set_``, which ``torch.load`` calls) was keyed after the pass with other keys: the model was recorded again,
with a warning; such a call is now keyed as it is made in the predicted pass too."""

import contextlib
import io
import json
import threading
import warnings
from unittest import mock

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.demo import demo_workload  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder import profiler as recorder_profiler  # noqa: E402
from kernelscope.recorder.retention import CappedSampleBook  # noqa: E402
from kernelscope.recorder.samples import SampleBook  # noqa: E402
from torch import nn  # noqa: E402

ATTRIBUTION = ["module_name", "function_name", "op", "sample_id"]


def _profile(model, samples, tmp_path, name, hold_limit=None, warmup_iterations=2, **options):
    """profile() with two warm-up passes (the keyed one, no rehearsal) unless told; ``hold_limit``: the bytes of
    inputs the recording may hold (0: none, so the recorded pass is keyed as each call is made)."""
    profiler = ModuleFunctionKernelProfiler(**options)
    with contextlib.ExitStack() as stack:
        if hold_limit is not None:
            stack.enter_context(mock.patch.object(recorder_profiler, "hold_limit_bytes", lambda *_: hold_limit))
        frame, data = profiler.profile(model, samples, warmup_iterations=warmup_iterations, out=tmp_path / name)
    return profiler, frame, data


def _same_recording(a, b, memory=True):
    """``memory``: the bytes the kept inputs hold are the same too."""
    (profiler_a, frame_a, data_a), (profiler_b, frame_b, data_b) = a, b
    assert frame_a[ATTRIBUTION].astype(str).values.tolist() == frame_b[ATTRIBUTION].astype(str).values.tolist()
    assert profiler_a.book.metadata() == profiler_b.book.metadata()
    report_a, report_b = profiler_a.book.report(), profiler_b.book.report()
    if not memory:
        assert report_a.pop("kept_bytes") >= report_b.pop("kept_bytes")
    assert report_a == report_b
    assert {name: [calls for calls, _ in entries] for name, entries in data_a.items()} == {
        name: [calls for calls, _ in entries] for name, entries in data_b.items()
    }


@pytest.mark.parametrize("cap_mb", [None, 0.05])
@pytest.mark.parametrize("warmups", [2, 3], ids=["keyed-warm-up", "and-rehearsal"])
def test_predicted_sample_ids_give_what_per_call_keys_give(tmp_path, cap_mb, warmups):
    model, samples = demo_workload("cpu")
    predicted = _profile(
        model, samples, tmp_path, "predicted", warmup_iterations=warmups, sample_memory_limit_mb=cap_mb
    )
    per_call = _profile(model, samples, tmp_path, "per_call", hold_limit=0, sample_memory_limit_mb=cap_mb)
    assert predicted[0].run.manifest["sample_keys"] == "predicted"
    assert per_call[0].run.manifest["sample_keys"] == "per_call"
    assert predicted[1]["sample_id"].notna().any()
    if cap_mb is not None:  # the cap's choices are made in the same order: the same signatures are not kept
        assert predicted[0].book.report()["signatures_not_kept"] > 0
    _same_recording(predicted, per_call)


class CountsPasses(nn.Module):
    def __init__(self):
        super().__init__()
        self.passes = 0


class ChangesShapes(CountsPasses):
    """Each pass slices one more row: the recorded pass's inputs have other shapes than the warm-up's."""

    def forward(self, x):
        self.passes += 1
        return F.relu(x[: self.passes])


class ChangesOrder(CountsPasses):
    """Odd passes call relu twice with one signature, even passes with two: the sample ids differ."""

    def forward(self, x):
        self.passes += 1
        return F.relu(x) + F.relu(x if self.passes % 2 else x[:1])


class CallsLater(CountsPasses):
    """gelu is called from the third pass on: the warm-up (second pass) never called it."""

    def forward(self, x):
        self.passes += 1
        return F.gelu(x) if self.passes >= 3 else F.relu(x)


@pytest.mark.parametrize("model_type", [ChangesShapes, ChangesOrder, CallsLater])
def test_a_model_whose_calls_differ_between_passes_is_recorded_again_per_call(tmp_path, model_type):
    model = model_type()
    with pytest.warns(RuntimeWarning, match="the model ran 4 passes, not 3"):
        profiler, frame, data = _profile(model, [((torch.randn(6, 6),), {})], tmp_path, "run")
    assert profiler.run.manifest["sample_keys"] == "per_call_after_miss"
    if model_type is ChangesShapes:  # plain pass, patched warm-up, predicted pass, then the pass recorded again
        assert model.passes == 4
        [(calls, ((sample,), _))] = data["relu"]
        assert calls == 1 and sample.shape == (4, 6)
    if model_type is ChangesOrder:  # the fourth pass: two signatures, each named by its own id in the trace
        assert [calls for calls, _ in data["relu"]] == [1, 1]
        assert sorted(frame.loc[frame["function_name"] == "relu", "sample_id"].unique()) == [0, 1]
    if model_type is CallsLater:
        assert list(data) == ["gelu"]


class WatchesItsPasses(CountsPasses):
    """Whether F.relu was patched in each pass, and the shape each pass got."""

    def __init__(self):
        super().__init__()
        self.patched = []

    def forward(self, x):
        self.patched.append(hasattr(F.relu, "__wrapped__"))
        return F.relu(x)


def test_with_three_warm_ups_the_last_two_are_patched_and_the_first_is_not(tmp_path):
    model = WatchesItsPasses()
    profiler, _, data = _profile(model, [((torch.randn(3, 3),), {})], tmp_path, "run", warmup_iterations=3)
    assert model.patched == [False, True, True, True], "plain, keyed, rehearsal, recorded: torch.compile sees F"
    assert profiler.run.manifest["sample_keys"] == "predicted"
    assert [calls for calls, _ in data["relu"]] == [1], "neither warm-up is counted"


def test_a_rehearsal_that_calls_an_unpredicted_function_keys_the_recorded_pass_per_call(tmp_path):
    model = CallsLater()  # gelu from the third pass: the rehearsal
    with pytest.warns(RuntimeWarning, match="keyed as each call was made$"):
        profiler, _, data = _profile(model, [((torch.randn(6, 6),), {})], tmp_path, "run", warmup_iterations=3)
    assert model.passes == 4, "caught before the recorded pass: no pass recorded twice"
    assert profiler.run.manifest["sample_keys"] == "per_call_after_miss"
    assert list(data) == ["gelu"] and [calls for calls, _ in data["gelu"]] == [1], "the rehearsal is not counted"


def test_a_miss_after_a_rehearsal_records_the_pass_again(tmp_path):
    model = ChangesShapes()
    with pytest.warns(RuntimeWarning, match="the model ran 5 passes, not 4"):
        profiler, _, data = _profile(model, [((torch.randn(6, 6),), {})], tmp_path, "run", warmup_iterations=3)
    [(calls, ((sample,), _))] = data["relu"]
    assert model.passes == 5 and calls == 1 and sample.shape == (5, 6)


def test_the_recorded_pass_is_keyed_per_call_without_a_warm_up_or_past_the_hold_limit(tmp_path):
    model, samples = demo_workload("cpu")
    profiler = ModuleFunctionKernelProfiler()
    profiler.profile(model, samples, warmup_iterations=0, out=tmp_path / "cold")
    assert profiler.run.manifest["sample_keys"] == "per_call"
    small, _, _ = _profile(model, samples, tmp_path, "small", hold_limit=4096)  # the first inputs fit, not all
    assert small.run.manifest["sample_keys"] == "per_call"
    assert _profile(model, samples, tmp_path, "big", hold_limit=2**30)[0].run.manifest["sample_keys"] == "predicted"


def test_the_cpu_hold_limit_is_not_the_sample_cap():
    limit = recorder_profiler.hold_limit_bytes("cpu", CappedSampleBook(0))
    assert limit is not None and limit > 0


def _calls():
    x, y = torch.randn(4, 6), torch.randn(6, 4)
    return [("f", (x,)), ("g", (y, 1)), ("f", (x.t(),)), ("f", (torch.randn(4, 6),)), ("g", (y, 2)), ("f", (x,))]


def _book_pass(book, calls):
    return [book.recorder(name)(args, {}) for name, args in calls]


@pytest.mark.parametrize("book_type", [SampleBook, lambda: CappedSampleBook(100)])
def test_the_book_predicts_ids_and_confirms_them_after_the_pass(book_type):
    per_call = book_type()
    per_call_ids = _book_pass(per_call, _calls())
    book = book_type()
    book.watch_warm_up()
    assert _book_pass(book, _calls()) == per_call_ids
    assert book.predict_next_pass()
    assert book.samples == {}, "the warm-up is not counted"
    assert _book_pass(book, _calls()) == per_call_ids
    assert book.samples == {}, "nothing is keyed during the predicted pass"
    assert book.confirm_predictions()
    assert book.metadata() == per_call.metadata()
    assert book.function_data().keys() == per_call.function_data().keys()
    if isinstance(book, CappedSampleBook):
        assert book.not_kept == per_call.not_kept and book.not_kept, "the 100-byte cap drops some signatures"


def test_a_rehearsed_prediction_starts_afresh():
    per_call = SampleBook()
    per_call_ids = _book_pass(per_call, _calls())
    book = SampleBook()
    book.watch_warm_up()
    _book_pass(book, _calls())
    assert book.predict_next_pass()
    assert _book_pass(book, _calls()) == per_call_ids  # the rehearsal
    assert book.predict_again() and book.held == [], "the rehearsal's inputs are let go"
    assert _book_pass(book, _calls()) == per_call_ids, "positions count from the start again"
    assert book.confirm_predictions() and book.metadata() == per_call.metadata()

    book.watch_warm_up()
    _book_pass(book, _calls())
    book.predict_next_pass()
    _book_pass(book, [*_calls(), ("h", (torch.randn(2),))])
    assert not book.predict_again() and book.samples == {} and not book.predicting, "h: keyed per call next"


def test_the_book_reports_a_wrong_prediction_and_a_call_it_never_predicted():
    book = SampleBook()
    book.watch_warm_up()
    _book_pass(book, _calls())
    book.predict_next_pass()
    swapped = _calls()
    swapped[0], swapped[2] = swapped[2], swapped[0]  # f's first two calls swap signatures: ids unchanged
    _book_pass(book, swapped)
    assert not book.confirm_predictions(), "same ids, other keys"

    book.watch_warm_up()
    _book_pass(book, _calls())
    book.predict_next_pass()
    _book_pass(book, [*_calls(), ("h", (torch.randn(2),))])
    assert not book.confirm_predictions(), "h was never called in the warm-up"


def test_the_warm_up_stops_holding_past_its_limit():
    book = CappedSampleBook(None)
    book.watch_warm_up(hold_limit_bytes=100)  # f's 96-byte inputs fit, g's add 96 more
    _book_pass(book, _calls()[:1])
    assert len(book.held) == 1
    _book_pass(book, _calls()[1:])
    assert book.held == [] and not book.predict_next_pass()


class TwoThreads(nn.Module):
    """relu on the calling thread and gelu on a second one, in the same pass."""

    def forward(self, x):
        out = {}
        worker = threading.Thread(target=lambda: out.update(g=F.gelu(x * 2)))
        worker.start()
        r = F.relu(x[:2])
        worker.join()
        return r, out["g"]


def test_calls_from_other_threads_are_predicted_and_confirmed(tmp_path):
    samples = [((torch.randn(4, 4),), {}), ((torch.randn(8, 4),), {})]
    predicted = _profile(TwoThreads(), samples, tmp_path, "predicted")
    per_call = _profile(TwoThreads(), samples, tmp_path, "per_call", hold_limit=0)
    assert predicted[0].run.manifest["sample_keys"] == "predicted"
    assert {"gelu", "relu"} <= set(predicted[2]), "the second thread's call is sampled"
    assert predicted[0].book.metadata() == per_call[0].book.metadata()


def test_a_reset_visits_only_the_recorders_called_since_the_last_one():
    """Visiting all of calls="all"'s recorders right before the recorded pass would evict the operators' code
    and data from the CPU caches (benchmarks/RESULTS.md, "Resetting the whole sample book")."""
    book = SampleBook()
    records = [book.recorder(f"f{i}") for i in range(100)]
    x = torch.randn(2)
    records[3]((x,), {})
    records[3]((x,), {})
    records[7]((x,), {})
    assert [book._controls.index(control) for control in book._used] == [3, 7]
    visited = []
    book._used = [
        control._replace(forget=lambda forget=control.forget, i=i: (visited.append(i), forget()))
        for i, control in zip((3, 7), book._used, strict=True)
    ]
    book.reset()
    assert visited == [3, 7] and book._used == []
    assert records[3]((x,), {}) == 0 and book.function_data() == {"f3": [(1, ((x,), {}))]}


class ReshapesInPlace(nn.Module):
    """relu's input is transposed in place after the call: keyed after the pass, it would show other strides."""

    def forward(self, x):
        h = x.clone()
        y = F.relu(h)
        h.t_()
        return y


class SetsStorage(nn.Module):
    """Tensor.set_ makes its own input (an empty tensor) a view of another's storage: keyed after its call, it
    has another shape."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        h = self.fc(x)
        view = torch.empty(0).set_(h.flatten().untyped_storage(), 0, (3, 3), (1, 3))
        return F.relu(view).sum() + h


class Loads(nn.Module):
    """torch.load rebuilds each tensor with Tensor.set_ onto its loaded storage."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        buffer = io.BytesIO()
        torch.save({"h": F.elu(self.fc(x))}, buffer)
        buffer.seek(0)
        return F.elu(torch.load(buffer, weights_only=True)["h"])


@pytest.mark.parametrize("warmups", [2, 3], ids=["keyed-warm-up", "and-rehearsal"])
@pytest.mark.parametrize("model_type", [ReshapesInPlace, SetsStorage, Loads])
def test_calls_whose_inputs_are_reshaped_in_place_are_recorded_once_as_keyed_per_call(tmp_path, model_type, warmups):
    model, samples = model_type(), [((torch.randn(6, 6),), {})]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        predicted = _profile(model, samples, tmp_path, "predicted", warmup_iterations=warmups)
    per_call = _profile(model, samples, tmp_path, "per_call", hold_limit=0)
    assert predicted[0].run.manifest["sample_keys"] == "predicted"
    # Keyed as each call is made, torch.load's set_ counts its input's empty storage, not the loaded one it holds
    # when kept; the predicted pass counts the kept inputs' storages after the pass, as they stay.
    _same_recording(predicted, per_call, memory=model_type is not Loads)
    if model_type is not ReshapesInPlace:
        [entry] = json.loads((tmp_path / "predicted" / "samples.json").read_text())["functions"]["Tensor.set_"]
        assert entry["args"]["tuple"][0]["tensor"]["shape"] == [0], "described as it was at the call"
        assert predicted[1]["function_name"].notna().all()
