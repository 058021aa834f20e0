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


class TracesItsChild(torch.nn.Module):
    """torch.jit.trace of a child in every forward: under the tracer a tensor's sizes and numel() are tensors, so the
    keys held tensors (comparing them called Tensor.__eq__, counted as the model's calls) and samples.json a tensor
    where a byte count goes (profile() raised TypeError writing it)."""

    def __init__(self):
        super().__init__()
        self.child = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.GELU())
        self.graphs = []

    def forward(self, x):
        traced = torch.jit.trace(self.child, (x,), check_trace=False)
        self.graphs.append(str(traced.graph))
        return traced(x) * 2


@pytest.mark.parametrize("warmup", [0, 2])
def test_calls_made_under_torch_jit_trace_are_keyed_by_their_sizes_and_record_nothing_into_the_graph(warmup):
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    model = TracesItsChild().eval()
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 6),), {})], warmup_iterations=warmup)
    assert {name: [calls for calls, _ in entries] for name, entries in data.items()} == {
        "linear": [1], "gelu": [1], "Tensor.__mul__": [1]}  # fmt: skip
    assert frame["function_name"].notna().all()
    assert not any("aten::size" in graph or "aten::numel" in graph for graph in model.graphs), model.graphs[-1]
