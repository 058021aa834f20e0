"""The nesting of a sample's arguments: every sample the recorder writes (samples.json and samples.pt) the analyzer
reads back, and a deeper one made by hand is refused in one line. MAX_NESTING counts containers, the args tuple and
the kwargs dict the first level."""

import orjson
import pytest
import torch
from kernelscope.analyzer import BadInputError
from kernelscope.analyzer.sample_tensors import load_sample_tensors
from kernelscope.analyzer.samples import MAX_NESTING, ObjectRepr, TensorMeta, function_data_from_store, read_samples
from kernelscope.recorder.retention import CappedSampleBook
from kernelscope.recorder.run_writer import _write_tensors

MANIFEST = {"files": {"sample_tensors": "samples.pt"}}


def _args(levels: int, leaf):
    """An args tuple of ``levels`` containers in all (itself and ``levels - 1`` lists) around ``leaf``."""
    for _ in range(levels - 1):
        leaf = [leaf]
    return (leaf,)


def _depth_of(value) -> int:
    depth = 0
    while isinstance(value, (tuple, list)):
        depth, value = depth + 1, value[0]
    return depth


def _written(tmp_path, levels: list[int]):
    """A recorder's samples.json and samples.pt of function ``f``, one sample per entry of ``levels``."""
    book = CappedSampleBook(None)
    record = book.recorder("f")
    for n in levels:
        record(_args(n, torch.full((n,), 1.0)), {})
    (tmp_path / "samples.json").write_bytes(orjson.dumps({"format_version": 1, "functions": book.metadata()}))
    assert _write_tensors(tmp_path / "samples.pt", book, None)["saved"]
    return book


def test_every_sample_the_recorder_writes_is_read_back(tmp_path):
    levels = [MAX_NESTING, MAX_NESTING + 1, 3 * MAX_NESTING]  # 192 lists: past orjson's 255 JSON levels
    book = _written(tmp_path, levels)
    assert [book.is_kept("f", i) for i in range(3)] == [True, False, False], "a deeper sample keeps no tensors"
    data = function_data_from_store(read_samples(tmp_path / "samples.json"), tmp_path / "samples.json")
    kept, *deeper = [args for _, (args, _) in data["f"]]
    assert _depth_of(kept) == MAX_NESTING
    leaf = kept
    for _ in range(MAX_NESTING):
        leaf = leaf[0]
    assert isinstance(leaf, TensorMeta) and (leaf.shape, leaf.dtype) == ((MAX_NESTING,), "float32")
    for args in deeper:  # described down to the limit, then by a summary of what lies deeper
        assert _depth_of(args) == MAX_NESTING
        inner = args
        for _ in range(MAX_NESTING):
            inner = inner[0]
        assert inner == ObjectRepr("builtins.list", f"<list nested deeper than {MAX_NESTING} levels>")
    tensors = load_sample_tensors(tmp_path, MANIFEST, data)["f"]
    stored = tensors[0][1][0]
    for _ in range(MAX_NESTING):
        stored = stored[0]
    assert torch.equal(stored, torch.full((MAX_NESTING,), 1.0))
    assert [sample for _, sample in tensors[1:]] == [sample for _, sample in data["f"][1:]], "metadata only"


@pytest.mark.parametrize("levels, refused", [(MAX_NESTING, False), (MAX_NESTING + 1, True)])
def test_a_sample_made_deeper_by_hand_is_refused_in_one_line(tmp_path, levels, refused):
    book = _written(tmp_path, [2])
    store = read_samples(tmp_path / "samples.json")
    deep = {"tensor": store["f"][0]["args"]["tuple"][0]["list"][0]["tensor"]}
    for _ in range(levels - 1):
        deep = {"list": [deep]}
    store["f"][0]["args"] = {"tuple": [deep]}
    (tmp_path / "samples.json").write_bytes(orjson.dumps({"format_version": 1, "functions": store}))
    if refused:
        with pytest.raises(BadInputError) as raised:
            function_data_from_store(read_samples(tmp_path / "samples.json"), tmp_path / "samples.json")
        assert str(raised.value) == (
            f"{tmp_path / 'samples.json'}: has a malformed sample 0 of function 'f' (nested deeper than 64 levels)"
        )
    else:
        function_data_from_store(read_samples(tmp_path / "samples.json"), tmp_path / "samples.json")
    metadata = {"f": [(1, _args(2, book.samples["f"][0][0][0]))]}  # samples.json's side, as the analyzer reads it
    torch.save(
        {"format_version": 1, "functions": {"f": [[list(_args(levels, torch.ones(2))), {}]]}}, tmp_path / "samples.pt"
    )
    if refused:
        with pytest.raises(BadInputError) as raised:
            load_sample_tensors(tmp_path, MANIFEST, metadata)
        assert str(raised.value) == f"{tmp_path / 'samples.pt'}: holds a sample of 'f' nested deeper than 64 levels"
    else:
        assert _depth_of(load_sample_tensors(tmp_path, MANIFEST, metadata)["f"][0][1][0]) == levels


@pytest.mark.parametrize("limit", [None, 0], ids=["all kept", "metadata only"])
def test_arguments_of_any_depth_or_holding_themselves_are_recorded_without_recursing_past_the_limit(tmp_path, limit):
    looped: list = [torch.ones(2)]
    looped.append(looped)  # a list that holds itself
    deep = _args(1000, torch.ones(3))
    book = CappedSampleBook(limit)
    record = book.recorder("f")
    for args in (deep, (looped,), _args(1000, torch.ones(3)), _args(1000, 1.5)):
        book.hold(args, {})
        record(args, {})
    # past the limit a container is one signature whatever it holds: the three 1000-deep arguments are one sample
    assert [s["calls"] for s in book.metadata()["f"]] == [3, 1]
    if limit == 0:  # what is kept of a sample not kept holds no tensor at any depth
        kept = book.samples["f"]
        pending, seen = list(kept.values() if isinstance(kept, dict) else kept), set()
        while pending:
            item = pending.pop()
            assert not isinstance(item, torch.Tensor)
            if isinstance(item, (tuple, list, dict)) and id(item) not in seen:
                seen.add(id(item))
                pending.extend(item.values() if isinstance(item, dict) else item)
    (tmp_path / "samples.json").write_bytes(orjson.dumps({"format_version": 1, "functions": book.metadata()}))
    data = function_data_from_store(read_samples(tmp_path / "samples.json"), tmp_path / "samples.json")
    assert [calls for calls, _ in data["f"]] == [3, 1]
