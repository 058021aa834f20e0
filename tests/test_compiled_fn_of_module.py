"""profile(torch.compile(model), module=model): the callable run is the compiled wrapper, the module named is what it
wraps. Its graphs trace every module inside (``inner(x=x)`` guards ``forward`` is not in ``inner.__dict__`` on the way
to a buffer), so the modules under it are a compiled module's, as when the wrapper itself is named: their forwards
patched, torch refused the compiled code and the recording fell back to module scopes (found on transformers models
by benchmarks/sweep_cpu_models_unseen9.py). The wrapper is found at its call, however the program holds it."""

import warnings

import pytest
from conftest import assert_patches_undone, snapshot_patch_targets

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.compiled import compiled_entries  # noqa: E402
from torch import nn  # noqa: E402


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8))

    def forward(self, x):
        return F.relu(self.fc(x)) * self.scale


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner, self.head = Inner(), nn.Linear(8, 8)

    def forward(self, x):
        return self.head(self.inner(x=x))


def _profile(fn, module, samples, tmp_path, name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profiler = ModuleFunctionKernelProfiler()
        frame, data = profiler.profile(fn, samples, module=module, out=tmp_path / name)
    return profiler, frame, data, [str(w.message) for w in caught if str(w.message).startswith("kernelscope")]


def _entries() -> dict:
    return {code: {id(entry.code) for entry in found} for code, found in compiled_entries().items()}


@pytest.mark.parametrize("wrapped", ["root", "child", "held"])
def test_a_compiled_wrapper_profiled_with_the_module_it_wraps_runs_its_entries(wrapped, tmp_path):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Outer().eval()
    target = model.inner if wrapped == "child" else model  # the wrapper of the named module or one under it
    fn = compiled = torch.compile(target, backend="eager")
    if wrapped == "held":  # run by a function of the program's own: found at its call, not as profile()'s callable
        fn = lambda **kwargs: compiled(**kwargs)  # noqa: E731
    samples = [((), {"x": torch.randn(5, 8)})]
    with torch.no_grad():
        expected = fn(**samples[0][1])
    before, patch_targets, own_forward = _entries(), snapshot_patch_targets(model), vars(compiled)["forward"]
    own_call = vars(type(compiled))["__call__"]
    profiler, frame, data, warned = _profile(fn, model, samples, tmp_path, "named")
    assert warned == [] and profiler.run.manifest["compiled_code"] == "kept"
    assert _entries() == before, "no frame compiled anew"
    region = frame[frame["call_op"].fillna("").str.startswith("Torch-Compiled Region")]
    prefix = "inner" if wrapped == "child" else ""
    assert len(region) > 0 and set(region["module_name"]) == {prefix}
    assert set(region["function_name"]) == {"torch.compile"} and [n for n, _ in data["torch.compile"]] == [1]
    assert frame["function_name"].notna().all()
    assert_patches_undone(model, patch_targets)
    assert vars(compiled)["forward"] is own_forward, "the wrapper's scope is taken back"
    with torch.no_grad():
        assert torch.equal(fn(**samples[0][1]), expected)
    assert vars(type(compiled))["__call__"] is own_call, "torch's class is put back"
