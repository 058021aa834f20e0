"""What a keyed warm-up predicts of the recorded pass's sample ids (SampleBook, samples.py), whatever the order in
which the threads the model starts make their calls.

A function's calls on the thread that runs the passes come in the same order in every pass: their ids are predicted
by position. The calls of the threads the model starts (a thread pool's heads) interleave differently in every pass:
theirs are looked up by key among the warm-up's signatures, and only where a key is not found (an argument made anew
in every pass that leaves two signatures alike) by their position among those threads' calls. Signatures that the
recorded pass saw first in another order than the warm-up keep the warm-up's numbering, which the trace's scopes
hold: ``renumbered`` finds it, ``SampleBook.confirm_predictions`` applies it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .sample_keys import across_passes


class Prediction(NamedTuple):
    """What the keyed warm-up says of one function's calls in the next pass."""

    control: Any  # the function's recorder (samples._RecorderControl)
    order: list[int]  # the sample id of each call, in call order
    keys: list  # the key of each sample id
    own: list[int]  # the ids of the calls made on the thread that runs the passes, in their order
    others: list[int]  # the ids of the calls of other threads, in their order (which differs between passes)
    at_call: bool  # the warm-up's inputs were reshaped in place after its calls: keyed as each call is made

    @classmethod
    def of(cls, control: Any, thread: int) -> Prediction:
        """The prediction from the calls ``control`` keyed in the warm-up; ``thread``: the one that runs the passes."""
        order, keys = control.calls()
        callers, at_call = control.callers(), control.reshaped()
        if all(caller == thread for caller in callers):
            return cls(control, order, keys, order, [], at_call)
        pairs = list(zip(order, callers, strict=True))
        own = [sample_id for sample_id, caller in pairs if caller == thread]
        return cls(control, order, keys, own, [sample_id for sample_id, caller in pairs if caller != thread], at_call)


def ids_by_key(keys: list) -> dict:
    """The sample id of each key, and of each key as another pass builds it (``across_passes``: an argument keyed by
    its identity, by its type alone) where that names one signature only."""
    try:
        by_key = {key: sample_id for sample_id, key in enumerate(keys)}
        loose: dict = {}
        for sample_id, key in enumerate(keys):
            alike = across_passes(key)
            if alike not in by_key:
                loose.setdefault(alike, []).append(sample_id)
    except Exception:  # noqa: BLE001 (an argument's __eq__ of the model's own, met on a hash collision)
        return {}
    by_key.update((alike, ids[0]) for alike, ids in loose.items() if len(ids) == 1)
    return by_key


def renumbered(held: list, keyed: list[int], control: Any) -> list[int] | None:
    """``new_ids``, where ``new_ids[i]`` is the id predicted for the held calls of ``control``'s function that were
    keyed ``i`` after the pass: where all of them were predicted one id, and no other call that id (a permutation of
    the keyed ids); otherwise None. ``held``: ``(control, predicted id, args, kwargs, key at the call or None)`` of
    each call, ``keyed``: the id each got keyed after the pass."""
    new_ids: dict[int, int] = {}
    for (call_control, predicted, *_), sample_id in zip(held, keyed, strict=True):
        if call_control is control and new_ids.setdefault(sample_id, predicted) != predicted:
            return None
    numbering = [new_ids.get(i, -1) for i in range(len(new_ids))]
    return numbering if sorted(numbering) == list(range(len(numbering))) else None


def inverse(new_ids: list[int]) -> list[int]:
    """``old_ids``, where ``old_ids[new_ids[i]] == i``, of a permutation."""
    old_ids = [0] * len(new_ids)
    for old, new in enumerate(new_ids):
        old_ids[new] = old
    return old_ids


def why_missed(book: Any, recordings: int) -> str:
    """The first words of profile()'s warning after a wrong prediction of the recorded pass's sample ids (``book``: the
    SampleBook; ``recordings``: how many times the pass was recorded): why it missed."""
    if recordings > 1 and book.missed_by_thread_order():
        return (
            "kernelscope: the model's calls from several threads came in another order in the recorded pass than in "
            "the warm-up, and their inputs did not tell them apart"
        )
    if recordings > 1 and book.calls_as_predicted():
        return (
            "kernelscope: inputs of the recorded pass's calls were changed in place after their call (a reshape such "
            "as x.t_() or x.unsqueeze_(0)), which keying them after the pass cannot tell from calls that differ "
            "between passes"
        )
    return (
        "kernelscope: the model's calls differed between the warm-up passes and the recorded pass (other calls, or "
        "inputs of other shapes)"
    )
