"""Nested tensors as call inputs: a ragged size is null in samples.json, keys stay equal between passes, the run
loads back, and a replay refuses the sample with its reason (profile() crashed on both layouts before)."""

import warnings

import orjson
import pytest
from kernelscope.analyzer import load_run

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.bench import bench  # noqa: E402
from torch import nn  # noqa: E402


class OnNested(nn.Module):
    def forward(self, nested):
        return F.relu(nested) * 2


def _nested(layout, lengths):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the strided layout is a prototype, and says so
        return torch.nested.nested_tensor([torch.randn(n, 8) for n in lengths], layout=layout)


@pytest.mark.parametrize("layout", [torch.jagged, torch.strided], ids=["jagged", "strided"])
def test_nested_inputs_are_recorded_with_their_ragged_sizes_null(layout, tmp_path):
    samples = [((_nested(layout, (3, 5)),), {}), ((_nested(layout, (2, 7)),), {})]
    profiler = ModuleFunctionKernelProfiler()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a wrong prediction of the recorded pass warns
        frame, data = profiler.profile(OnNested(), samples, warmup_iterations=1, out=tmp_path / "run")
    assert profiler.run.manifest["sample_keys"] == "predicted", "the two passes keyed the calls alike"
    assert "relu" in set(frame["function_name"]) and frame["function_name"].notna().all()
    stored = orjson.loads((tmp_path / "run" / "samples.json").read_bytes())["functions"]["relu"]
    shapes = [arg["tensor"]["shape"] for sample in stored for arg in sample["args"]["tuple"] if "tensor" in arg]
    assert shapes and all(shape == [2, None, 8] for shape in shapes), shapes
    assert all(arg["tensor"]["stride"] is None for sample in stored for arg in sample["args"]["tuple"])
    with load_run(tmp_path / "run") as run:
        metas = [args[0] for _calls, (args, _kwargs) in run.function_data()["relu"]]
        assert {str(meta) for meta in metas} == {"float32[2,*,8]@cpu"}
        results = bench(run, ["relu"], repeat=1, warmup=0)
    assert set(results["status"]) == {"refused"}
    assert results["reason"].str.contains("nested tensor").all()
