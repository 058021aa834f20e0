"""The recorder's per-call sample key (sample_keys.call_key) against the recursive reference (signature_key):
two calls share a call_key exactly when their (args, kwargs) share a signature_key."""

import itertools

import pytest

torch = pytest.importorskip("torch")

from kernelscope.recorder.sample_keys import call_key, signature_key  # noqa: E402
from kernelscope.recorder.samples import SampleBook  # noqa: E402


def _calls():
    """(calls, the tensors to remember, each call's reference signature_key)."""
    x = torch.randn(4, 6)
    weight = torch.nn.Parameter(torch.randn(6, 6))
    other_weight = torch.nn.Parameter(torch.randn(6, 6))  # same signature as weight, not remembered
    buffer = torch.randn(6)
    sparse = torch.randn(4, 6).to_sparse()
    calls = [
        ((x,), {}),
        ((torch.randn(4, 6),), {}),  # same signature as x
        ((x.to(torch.float16),), {}),
        ((torch.randn(6, 4).t(),), {}),  # same shape, other strides
        ((torch.randn(4, 7)[:, :6],), {}),
        ((x, weight, buffer), {}),
        ((x, other_weight, buffer), {}),  # a weight passed where a remembered one was: same signature
        ((x, weight, torch.randn(6)), {}),  # a fresh tensor where a buffer was: same signature
        ((x, weight, None), {}),
        ((sparse,), {}),
        ((torch.randn(4, 6).to_sparse(),), {}),
        ((x, 1), {}),
        ((x, True), {}),
        ((x, 1.0), {}),
        ((x, 0.0), {}),
        ((x, -0.0), {}),
        ((x, float("nan")), {}),
        ((x, float("nan")), {}),
        ((x, (1, 1)), {}),
        ((x, (1, True)), {}),
        ((x, (1.0, 1)), {}),
        ((x, [1, 1]), {}),
        ((x, (x, 1)), {}),
        ((x, ()), {}),
        ((x, "mean"), {}),
        ((x, None), {}),
        ((x, torch.float16), {}),
        ((x, torch.device("cpu")), {}),
        ((x, torch.contiguous_format), {}),
        ((x, slice(None, 2)), {}),
        ((x, (slice(None), 0)), {}),
        ((x, (slice(None), 1)), {}),
        ((x, {"a": 1}), {}),
        ((x,), {"dim": 1}),
        ((x,), {"dim": True}),
        ((x,), {"axis": 1}),
        ((x, 1), {"dim": 1}),
        ((x,), {"dim": 1, "keepdim": False}),
        ((x,), {"keepdim": False, "dim": 1}),  # other keyword order: another signature for both keys
        ((x,), {"weight": weight}),
        ((x,), {"weight": other_weight}),
        ((), {"input": x}),
        ((dict,), {}),  # the kwargs marker itself as an argument
        ((x, dict, ("dim",)), {}),
    ]
    references = [signature_key((args, kwargs)) if kwargs else signature_key((args,)) for args, kwargs in calls]
    return calls, [weight, buffer], references


def test_call_keys_are_equal_exactly_when_signature_keys_are():
    calls, remembered, references = _calls()
    book = SampleBook()
    book.remember(remembered)
    keys = [call_key(args, kwargs, book.persistent) for args, kwargs in calls]
    for (i, key_a), (j, key_b) in itertools.combinations(enumerate(keys), 2):
        same_reference = references[i] == references[j]
        assert (key_a == key_b) == same_reference, (calls[i], calls[j])
        if key_a == key_b:
            assert hash(key_a) == hash(key_b)


def test_the_book_gives_one_sample_id_per_signature_in_first_seen_order():
    calls, remembered, references = _calls()
    book = SampleBook()
    book.remember(remembered)
    record = book.recorder("f")
    ids = [record(args, kwargs) for args, kwargs in calls]
    first_seen: dict = {}
    for reference in references:
        first_seen.setdefault(reference, len(first_seen))
    assert ids == [first_seen[reference] for reference in references]
    assert [calls for calls, _ in book.function_data()["f"]] == [references.count(r) for r in first_seen]
    book.reset()
    assert book.function_data() == {}
    assert record(*calls[0]) == 0, "after reset the same recorder starts again from sample 0"
