"""The cap on the memory kept by input samples (sample_memory_limit_mb): signatures past it are counted
and described but their tensors are not kept, a warning says so, and what is kept is released on the
next profile()."""

import gc
import json
import warnings
import weakref

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.analyzer import TensorMeta, load_run  # noqa: E402
from kernelscope.recorder import DEFAULT_SAMPLE_MEMORY_LIMIT_MB, ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402

MiB = 2**20


class Activations(nn.Module):
    """relu of a fresh intermediate per call: only the samples can keep those alive."""

    def __init__(self):
        super().__init__()
        self.refs = []

    def forward(self, x):
        y = x * 2
        self.refs.append(weakref.ref(y))
        return F.relu(y)


def _samples():
    # three signatures of 4 KiB, 8 KiB and 4 KiB (fp32), in this first-seen order; the first is called twice
    return [((torch.randn(32, 32),), {}), ((torch.randn(64, 32),), {}), ((torch.randn(32, 32).t(),), {})] + [
        ((torch.randn(32, 32),), {})
    ]


def _record(limit_mb, tmp_path, name):
    model = Activations()
    profiler = ModuleFunctionKernelProfiler({"relu"}, sample_memory_limit_mb=limit_mb)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame, data = profiler.profile(model, _samples(), warmup_iterations=0, out=tmp_path / name)
    gc.collect()
    alive = [ref() is not None for ref in model.refs]
    return profiler, frame, data, alive, [w for w in caught if "sample_memory_limit_mb" in str(w.message)]


def test_signatures_past_the_cap_are_counted_and_described_but_not_kept(tmp_path):
    _, frame, data, alive, warned = _record(8 / 1024, tmp_path, "capped")  # 8 KiB
    _, full_frame, full_data, full_alive, full_warned = _record(None, tmp_path, "uncapped")
    assert full_alive == [True, True, True, False] and not full_warned, "uncapped: each signature's first input"
    assert alive == [True, False, True, False], "4 KiB kept, 8 KiB past the cap, the next 4 KiB fits again"
    assert [calls for calls, _ in data["relu"]] == [calls for calls, _ in full_data["relu"]] == [2, 1, 1]
    kept, dropped, transposed = (args[0] for _, (args, _) in data["relu"])
    assert isinstance(kept, torch.Tensor) and isinstance(transposed, torch.Tensor)
    assert dropped == TensorMeta((64, 32), "float32", (32, 1), "cpu", 8192)
    (warning,) = warned
    assert issubclass(warning.category, RuntimeWarning)
    assert "the inputs of 1 of 3 distinct signatures were not kept" in str(warning.message)
    # the run directory describes every signature the same way, capped or not; samples.pt leaves it out
    assert json.loads((tmp_path / "capped" / "samples.json").read_text()) == json.loads(
        (tmp_path / "uncapped" / "samples.json").read_text()
    )
    manifest = json.loads((tmp_path / "capped" / "manifest.json").read_text())
    assert manifest["sample_memory"] == {
        "limit_bytes": 8192,
        "kept_bytes": 8192,
        "signatures": 3,
        "signatures_not_kept": 1,
    }
    stored = torch.load(tmp_path / "capped" / "samples.pt", weights_only=True)["functions"]["relu"]
    assert stored[1] is None and torch.equal(stored[0][0][0], kept)
    with load_run(tmp_path / "capped") as run:
        offline = run.function_data(tensors=True)["relu"]
    assert offline[1] == (1, ((dropped,), {})) and torch.equal(offline[2][1][0][0], transposed)
    # and the summary's sample columns are the same: tensor_size_MB counts every distinct signature
    columns = ["function_name", "calls", "num_distinct_samples", "tensor_size_MB"]

    def relu_row(frame, data):  # other calls (Tensor.__mul__) are not sampled here, and times differ
        summary = ModuleFunctionKernelProfiler().describe_results(frame, data)[columns]
        return summary[summary["function_name"] == "relu"].reset_index(drop=True)

    summary = relu_row(frame, data)
    assert summary.equals(relu_row(full_frame, full_data))
    assert summary["tensor_size_MB"].tolist() == [16384 / MiB]


def test_a_zero_cap_keeps_no_input_and_a_shared_storage_counts_once(tmp_path):
    _, _, data, alive, warned = _record(0, tmp_path, "zero")
    assert alive == [False] * 4 and len(warned) == 1
    assert all(isinstance(args[0], TensorMeta) for _, (args, _) in data["relu"])
    assert not (tmp_path / "zero" / "samples.pt").exists() or all(
        entry is None for entry in torch.load(tmp_path / "zero" / "samples.pt", weights_only=True)["functions"]["relu"]
    )

    class Views(nn.Module):
        def forward(self, x):
            return F.relu(x) + F.relu(x.t()).t()  # two signatures, one storage

    profiler = ModuleFunctionKernelProfiler(sample_memory_limit_mb=4 / 1024)  # exactly one 4 KiB storage
    with pytest.warns(RuntimeWarning, match="the inputs of 1 of 3 distinct signatures were not kept"):
        _, shared = profiler.profile(Views(), [((torch.randn(32, 32),), {})], warmup_iterations=0)
    assert [type(args[0]) for _, (args, _) in shared["relu"]] == [torch.Tensor, torch.Tensor]
    ((_, (add_args, _)),) = shared["Tensor.__add__"]
    assert all(isinstance(arg, TensorMeta) for arg in add_args), "the sum's two new 4 KiB storages do not fit"
    assert profiler.book.report()["kept_bytes"] == 4096


def test_kept_samples_are_released_by_the_next_profile_and_by_release(tmp_path):
    model = Activations()
    profiler = ModuleFunctionKernelProfiler()
    assert profiler.sample_memory_limit_mb == DEFAULT_SAMPLE_MEMORY_LIMIT_MB == 1024
    _, data = profiler.profile(model, _samples(), warmup_iterations=0)
    del data
    gc.collect()
    first_pass = list(model.refs)
    assert [ref() is not None for ref in first_pass] == [True, True, True, False]
    profiler.profile(model, _samples(), warmup_iterations=0)
    gc.collect()
    assert all(ref() is None for ref in first_pass), "the next profile() drops the previous samples"
    assert any(ref() is not None for ref in model.refs[4:])
    profiler.release()
    gc.collect()
    assert all(ref() is None for ref in model.refs)


def test_the_cap_must_be_a_size():
    with pytest.raises(ValueError, match="sample_memory_limit_mb"):
        ModuleFunctionKernelProfiler(sample_memory_limit_mb=-1)


def test_the_models_own_parameters_and_buffers_do_not_count_against_the_cap():
    model = nn.Sequential(nn.Linear(256, 256), nn.BatchNorm1d(256).eval())  # 256 KiB of weight, 1 KiB buffers
    profiler = ModuleFunctionKernelProfiler({"linear", "batch_norm"}, sample_memory_limit_mb=16 / 1024)  # 16 KiB
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no signature may be dropped
        _, data = profiler.profile(model, [((torch.randn(4, 256),), {})], warmup_iterations=0)
    ((_, (linear_args, _)),) = data["linear"]
    assert linear_args[1] is model[0].weight, "the live weight is kept"
    ((_, (norm_args, _)),) = data["batch_norm"]
    assert isinstance(norm_args[0], torch.Tensor)
    report = profiler.book.report()
    assert report["signatures_not_kept"] == 0
    assert report["kept_bytes"] == 2 * 4 * 256 * 4, "only the two 4 KiB activations count"
