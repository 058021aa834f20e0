"""Distinct input samples of functional calls, keyed by their full signature (sample_keys.py), in first-seen
order, with their call counts and live references.
"""

from __future__ import annotations

from threading import get_ident
from typing import Any, NamedTuple

import torch

from .compiled import unseen_by_dynamo
from .predictions import Prediction, ids_by_key, inverse, renumbered
from .sample_descriptions import describe
from .sample_keys import across_passes, as_called, call_key, holds_containers, tensor_key, untraced

Sample = tuple[tuple, dict]
_Tensor = torch.Tensor
# a lazy module's parameters before its first forward (nn.LazyLinear): no shape yet, and a new one after it
_Uninitialized = torch.nn.parameter.UninitializedTensorMixin


class SampleBook:
    """Per function: distinct samples in first-seen order, their call counts, live references.

    A recording keys its calls in one of two ways. Per call: each call's key is built as it is made (the
    recorder's slow path, about half of the instrumentation's cost per sampled call). Predicted (profile()
    with a warm-up): the warm-up pass is keyed per call and holds its calls' inputs (``watch_warm_up``);
    the recorded pass then only names each call's sample id by its position among its function's calls in
    the warm-up and holds its inputs (``predict_next_pass``); after the pass, the held calls are keyed in
    call order exactly as the per-call path would have keyed them, and every predicted id and key is
    checked (``confirm_predictions``). A wrong prediction (a model whose calls differ between passes) is
    reported, never kept: the caller records the pass again, keyed per call.

    Positions count on the thread that runs the passes only: the threads the model starts (a thread pool's
    heads) call in another order in every pass, so their calls are looked up by key (recorder/predictions.py).

    A function whose inputs the warm-up reshaped in place after its calls (``h.t_()`` after ``F.relu(h)``;
    ``Tensor.set_``, which makes its own input a view of a storage, as ``torch.load`` does) would key otherwise after
    the pass: the predicted pass keys its calls (and describes each signature's first) as they are made, still
    holding them, so that it is confirmed against the warm-up all the same.

    Only the recorders called since the last reset are visited between passes (``calls="all"`` makes
    over a thousand): visiting them all right before the recorded pass slows the pass itself, as it evicts
    the operators' code and data from the CPU's caches.
    """

    def __init__(self) -> None:
        self.samples: dict[str, list[Sample]] = {}
        self.counts: dict[str, list[int]] = {}
        self.descriptions: dict[str, list[dict]] = {}  # each signature's samples.json entry, made at its first call
        self.persistent: dict[int, tuple] = {}
        self.held: list = []  # the calls of the pass being held, in call order
        self.holding = False  # the per-call path holds each call's inputs (hold())
        self.predicting = False
        self.hold_limit_bytes: int | None = None
        self._unpredicted = False  # a function the warm-up never called was called while predicting
        self._by_thread_order = False  # an id was predicted from the order of calls from several threads
        self.thread = get_ident()  # the thread that runs the passes (watch_warm_up, predict_next_pass)
        self._recorders: dict[str, Any] = {}
        self._controls: list[_RecorderControl] = []
        self._used: list[_RecorderControl] = []  # the recorders keyed per call since the last reset
        self._predicted: list[Prediction] = []
        self._missed: list[Prediction] = []  # the _predicted of a wrong prediction
        self._missed_by_thread_order = False

    def remember(self, tensors: Any) -> None:
        """Key these tensors once, up front: the parameters and buffers of the observed modules, which keep
        their shapes during one recording (a buffer replaced by a new tensor is keyed as any other)."""
        for tensor in tensors:
            if isinstance(tensor, _Tensor) and not isinstance(tensor, _Uninitialized):
                self.persistent[id(tensor)] = (tensor, tensor_key(tensor))

    def recorder(self, function_name: str):
        """The function ``(args, kwargs) -> sample id`` that counts the calls of ``function_name``."""
        record = self._recorders.get(function_name)
        if record is not None:
            return record
        ids: dict[Any, int] = {}
        samples: list[Sample] = []
        counts: list[int] = []
        descriptions: list[dict] = []
        order: list[int] = []  # the sample id of each call, in call order
        threads: list[int] = []  # the thread of each call of a watched warm-up, in call order
        persistent = self.persistent
        book = self
        prediction = None  # (an iterator over the warm-up's ids on the book's thread, hold, that thread)
        elsewhere: Any = None  # [the Prediction, its ids by key once needed, an iterator over other threads' ids]
        copies = False  # its calls took lists or dicts: held and kept as they were at the call (as_called)
        watched: list = []  # (args, kwargs, key) of each call the watched warm-up held
        at_call: set | None = None  # the keys its calls of the predicted pass made so far, where keyed as made

        def record(args: tuple, kwargs: dict) -> int:
            if prediction is not None:
                predicted, hold, thread = prediction
                if get_ident() == thread:
                    sample_id = next(predicted, -1)
                else:  # keyed: code dynamo may not have seen, run unseen where a compiled frame calls (compiled.py)
                    sample_id = unseen_by_dynamo(on_another_thread, args, kwargs)
                if copies:
                    args, kwargs = as_called(args, kwargs)
                made = None if at_call is None else unseen_by_dynamo(keyed_now, args, kwargs)
                hold((control, sample_id, args, kwargs, made))
                return sample_id
            return unseen_by_dynamo(key_call, args, kwargs)

        def keyed_now(args: tuple, kwargs: dict) -> tuple:
            """A call's key as it is made, and its description where it is the first of that key in the pass."""
            key = call_key(args, kwargs, persistent)
            try:
                first = key not in at_call
            except Exception:  # noqa: BLE001 (an argument's __eq__ of the model's own raised on a hash collision)
                key = call_key(args, kwargs, persistent, by_identity=True)
                first = key not in at_call
            if not first:
                return key, None
            at_call.add(key)
            return key, untraced(describe, args, kwargs)

        def on_another_thread(args: tuple, kwargs: dict) -> int:
            """A call of a thread the model started: the warm-up's id of its key, whatever the threads' order."""
            predicted, by_key, in_order = elsewhere
            if by_key is None:  # built at the first such call (threads racing here build equal ones)
                by_key = elsewhere[1] = ids_by_key(predicted.keys)
            try:
                key = call_key(args, kwargs, persistent)
                sample_id = by_key.get(key)
                if sample_id is None:
                    sample_id = by_key.get(across_passes(key))  # an argument made anew in every pass
            except Exception:  # noqa: BLE001 (an argument's __eq__ of the model's own)
                sample_id = None
            if sample_id is None:
                book._by_thread_order = True
                return next(in_order, -1)  # atomic: calls from several threads each get their own id
            return sample_id

        def key_call(args: tuple, kwargs: dict, made: tuple | None = None) -> int:
            """``made``: the call's key and description as it was made (``keyed_now``), where the pass held them."""
            nonlocal copies
            if not order:  # the first call since the last reset
                book._used.append(control)
                if book.predicting:
                    book._unpredicted = True
            key, description = made or (call_key(args, kwargs, persistent), None)
            try:
                sample_id = ids.get(key)
            except Exception:  # noqa: BLE001 (an argument's __eq__ of the model's own raised on a hash collision)
                key = call_key(args, kwargs, persistent, by_identity=True)  # holds no object to compare
                sample_id = ids.get(key)
            if sample_id is not None:
                counts[sample_id] += 1
            else:
                sample_id = ids[key] = len(samples)
                copies = copies or holds_containers(args, kwargs)  # a new signature: the only new structure
                if copies:
                    args, kwargs = as_called(args, kwargs)
                if not samples:  # functions that were never called have no entry
                    book.samples[function_name], book.counts[function_name] = samples, counts
                    book.descriptions[function_name] = descriptions
                samples.append((args, kwargs))
                counts.append(1)
                descriptions.append(description or untraced(describe, args, kwargs))  # under torch.jit.trace too
                book.new_signature(function_name, sample_id, args, kwargs)
            order.append(sample_id)
            if book.holding:
                threads.append(get_ident())
                book.hold(args, kwargs)
                if book.holding:  # not past the hold limit, which then lets go of the held inputs
                    watched.append((args, kwargs, key))
            return sample_id

        def forget() -> None:
            nonlocal prediction, elsewhere, at_call
            prediction = elsewhere = at_call = None
            watched.clear()
            ids.clear()
            samples.clear()
            counts.clear()
            descriptions.clear()
            order.clear()
            threads.clear()

        def predict(predicted: Prediction, hold: Any, thread: int) -> None:
            nonlocal prediction, elsewhere, at_call
            prediction = (iter(predicted.own), hold, thread)
            elsewhere = [predicted, None, iter(predicted.others)]
            at_call = set() if predicted.at_call else None

        def calls() -> tuple[list[int], list]:
            return order[:], list(ids)

        def callers() -> list[int]:
            return threads[:]

        def reshaped() -> bool:
            """Whether the inputs the watched warm-up held of its calls key otherwise now than at their calls."""
            try:
                for held_args, held_kwargs, key in watched:
                    now = call_key(held_args, held_kwargs, persistent)
                    if now != key and not _equal(now, key):  # _equal's walk only where the plain comparison fails
                        return True
            except Exception:  # noqa: BLE001 (the model's own objects): keyed as made, which is always right
                return True
            return False

        def stop_predicting() -> None:
            nonlocal prediction, at_call
            prediction = at_call = None

        def renumber(new_ids: list[int]) -> None:
            """Sample id ``i`` becomes ``new_ids[i]`` (a permutation)."""
            old_ids = inverse(new_ids)
            for values in (samples, counts, descriptions):
                values[:] = [values[old] for old in old_ids]
            for key, sample_id in ids.items():
                ids[key] = new_ids[sample_id]
            order[:] = [new_ids[sample_id] for sample_id in order]

        control = _RecorderControl(
            function_name, forget, calls, callers, reshaped, predict, stop_predicting, key_call, renumber
        )
        first = self._recorders.setdefault(function_name, record)  # atomic: threads' first calls race here
        if first is record:
            self._controls.append(control)
        return first

    def watch_warm_up(self, hold_limit_bytes: int | None = None) -> None:
        """The next pass is a warm-up keyed per call whose calls' inputs are held (``hold``), while their tensor
        storage totals at most ``hold_limit_bytes`` (None = no limit): the order of its calls is what
        ``predict_next_pass`` predicts from; holding its inputs grows the allocator's cache to what the
        predicted pass will hold."""
        self.reset()
        self._missed, self._missed_by_thread_order = [], False
        self.holding = True
        self.hold_limit_bytes = hold_limit_bytes
        self.thread = get_ident()

    def hold(self, args: tuple, kwargs: dict) -> None:
        """Hold one warm-up call's inputs until ``predict_next_pass`` (CappedSampleBook applies the limit)."""
        self.held.append((args, kwargs))

    def predict_next_pass(self) -> bool:
        """After the watched warm-up: the next pass predicts its calls' sample ids and holds their inputs, if
        the warm-up's were all held (True); otherwise (False) it is keyed per call."""
        fits = self.holding
        thread = self.thread = get_ident()
        warm_up = [Prediction.of(control, thread) for control in self._used] if fits else []
        self.reset()  # the warm-up's inputs are let go: their memory stays in the allocator's cache
        if not fits:
            return False
        self._predicted = warm_up
        self._start_predicting()
        return True

    def predict_again(self) -> bool:
        """After a rehearsal of the predicted pass (its inputs held, nothing keyed), predict the next pass afresh:
        its calls get their ids from the warm-up again (True). False if the rehearsal called a function the
        warm-up never called: the book is reset and the next pass is keyed per call."""
        if self._unpredicted:
            self.reset()
            return False
        self._start_predicting()
        return True

    def _start_predicting(self) -> None:
        self.held = []
        hold = self.held.append
        for predicted in self._predicted:
            predicted.control.predict(predicted, hold, self.thread)
        self.predicting = True
        self._by_thread_order = False

    def confirm_predictions(self) -> bool:
        """After the predicted pass: key its held calls in call order (counts, samples, new signatures: what
        the per-call path gives) and say whether every predicted sample id was right."""
        held, self.held = self.held, []
        predicted, self._predicted = self._predicted, []
        right = as_many_calls = not self._unpredicted  # as many calls of each function as the warm-up, no other
        self.predicting = self._unpredicted = False
        for prediction in predicted:
            prediction.control.stop_predicting()
        keyed = [control.key_call(args, kwargs, made) for control, _, args, kwargs, made in held]
        other_ids = {  # functions whose signatures were first seen in another order than in the warm-up
            call[0].name: call[0] for call, sample_id in zip(held, keyed, strict=True) if call[1] != sample_id
        }
        new_ids = {name: renumbered(held, keyed, control) for name, control in other_ids.items()}
        # Equal ids need equal keys too: a call's inputs reshaped in place after it would show other keys.
        for prediction in predicted:
            order, found = prediction.control.calls()
            numbering = new_ids.get(prediction.control.name, ())
            if numbering is None:
                right = False
            elif numbering:
                found = [found[old] for old in inverse(numbering)]
            right = right and _equal(found, prediction.keys[: len(found)])
            as_many_calls = as_many_calls and len(order) == len(prediction.order)
        if right:
            for name, numbering in new_ids.items():
                other_ids[name].renumber(numbering)
                self.renumbered(name, numbering)
        self._missed = predicted if as_many_calls and not right else []
        self._missed_by_thread_order = self._by_thread_order and not right
        return right

    def missed_by_thread_order(self) -> bool:
        """After a wrong prediction: whether some of its ids were predicted from the order of the calls that several
        threads made, which differs between passes (the keys of those calls did not tell them apart)."""
        return self._missed_by_thread_order

    def renumbered(self, function_name: str, new_ids: list[int]) -> None:
        """Called when a function's sample id ``i`` becomes ``new_ids[i]`` (recorder/predictions.py)."""

    def calls_as_predicted(self) -> bool:
        """After a wrong prediction and the pass recorded again, keyed per call: whether the predicted pass made as
        many calls of each function as the warm-up it was predicted from, and the pass recorded again the very calls
        of that warm-up, with the same keys. Then the calls did not differ: inputs were changed in place after their
        calls (``h.t_()``), so that keyed after the pass they showed other keys."""
        if not self._missed:
            return False
        warm_up = {id(missed.control): (missed.order, missed.keys) for missed in self._missed}
        return len(self._used) == len(warm_up) and all(
            _equal(warm_up.get(id(control)), control.calls()) for control in self._used
        )

    def new_signature(self, function_name: str, sample_id: int, args: tuple, kwargs: dict) -> None:
        """Called once per distinct signature, after its first call is counted."""

    def function_data(self) -> dict[str, list[tuple[int, Sample]]]:
        """``{function: [(calls, (args, kwargs)), ...]}`` with the live arguments."""
        return {name: list(zip(self.counts[name], self.samples[name], strict=True)) for name in self.samples}

    def metadata(self) -> dict:
        """The torch-free store (samples.json): counts, tensor signatures, non-tensor values."""
        return {
            name: [
                {"sample_id": sample_id, "calls": calls, **description}
                for sample_id, (calls, description) in enumerate(
                    zip(self.counts[name], self.descriptions[name], strict=True)
                )
            ]
            for name in self.samples
        }

    def reset(self) -> None:
        """Forget every call and sample but keep the recorders, which the patched wrappers hold: a warm-up pass
        made with the scopes in place is not counted."""
        for control in self._used:
            control.forget()
        for prediction in self._predicted:
            prediction.control.forget()
        self._used, self._predicted = [], []
        self.samples, self.counts, self.descriptions = {}, {}, {}
        self.held = []
        self.holding = self.predicting = self._unpredicted = False

    def clear(self) -> None:
        """Forget everything, recorders and persistent keys included."""
        for control in self._controls:
            control.forget()
        self.reset()
        self._missed = []
        self.persistent.clear()
        self._recorders.clear()
        self._controls.clear()


def _equal(keys: Any, others: Any) -> bool:
    """Whether keys of two passes are equal, objects keyed by their identity by their type (``across_passes``); not
    where comparing them raised (an argument's ``__eq__`` of the model's own, which a new object in every pass
    meets)."""
    try:
        return across_passes(keys) == across_passes(others)
    except Exception:  # noqa: BLE001 (the model's own code)
        return False


class _RecorderControl(NamedTuple):
    name: str
    forget: Any
    calls: Any
    callers: Any
    reshaped: Any
    predict: Any
    stop_predicting: Any
    key_call: Any
    renumber: Any
