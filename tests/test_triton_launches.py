"""Triton kernels launched by hand (``kernel[grid](...)``) are calls named ``triton.<kernel>``.

CI has no GPU and no Triton: a module shaped like ``triton.runtime.jit`` stands in, with a ``JITFunction`` whose
``__getitem__`` and ``run`` are Triton's (``kernel[grid](*args)`` is ``kernel.run(*args, grid=grid,
warmup=False)``) and whose "kernel" is CPU work, which the CPU trace has as operators. The GPU sweep
(benchmarks/model_sweep.py, raw_triton) checks real Triton on the h200.
"""

import sys
import types
import warnings

import pytest

torch = pytest.importorskip("torch")
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.calls import torch_call_targets  # noqa: E402
from kernelscope.recorder.replay import NotReplayable, resolve_call  # noqa: E402
from torch import nn  # noqa: E402


class JITFunction:
    def __init__(self, fn):
        self.fn = fn

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def run(self, *args, grid, warmup, **kwargs):
        return self.fn(*args, **kwargs)


@pytest.fixture
def triton(monkeypatch):
    jit = types.ModuleType("triton.runtime.jit")
    jit.JITFunction = JITFunction
    runtime = types.ModuleType("triton.runtime")
    runtime.jit = jit
    package = types.ModuleType("triton")
    package.runtime = runtime
    for name, module in (("triton", package), ("triton.runtime", runtime), ("triton.runtime.jit", jit)):
        monkeypatch.setitem(sys.modules, name, module)
    return jit


def _scale(x_ptr, out_ptr, n, BLOCK=1024):  # noqa: N803 (Triton's constexpr style)
    torch.mul(x_ptr, 2.0, out=out_ptr)  # the kernel's work, an operator the CPU trace holds


class HandLaunched(nn.Module):
    def __init__(self, kernel):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.kernel = kernel

    def forward(self, x):
        y = self.fc(x)
        out = torch.empty_like(y)
        self.kernel[(4,)](y, out, y.numel(), BLOCK=256)
        return out.relu()


def _profile(model):
    profiler = ModuleFunctionKernelProfiler()
    frame, data = profiler.profile(model, [((torch.randn(4, 16),), {})], warmup_iterations=1)
    return frame, data


def test_a_hand_launched_kernel_is_a_call_named_after_it(triton):
    original_run = triton.JITFunction.run
    kernel = triton.JITFunction(_scale)
    frame, data = _profile(HandLaunched(kernel).eval())
    launched = frame[frame["function_name"] == "triton._scale"]
    assert "aten::mul" in set(launched["op"]) and set(launched["module_name"]) == {""}
    assert set(frame.loc[frame["op"] == "aten::mul", "function_name"]) == {"triton._scale"}
    assert frame["function_name"].notna().all()
    assert [calls for calls, _ in data["triton._scale"]] == [1]
    args, kwargs = data["triton._scale"][0][1]
    assert args[0] is kernel and tuple(args[1].shape) == (4, 16) and args[3] == 64
    assert kwargs == {"grid": (4,), "warmup": False, "BLOCK": 256}
    assert vars(triton.JITFunction)["run"] is original_run, "the class is put back exactly"


def test_two_kernels_are_two_calls(triton):
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.second = triton.JITFunction(_scale), triton.JITFunction(_shift)

        def forward(self, x):
            out = torch.empty_like(x)
            self.first[(1,)](x, out, x.numel())
            self.second[(1,)](out, out, x.numel())
            return torch.stack([out, out])

    frame, data = _profile(Two())
    assert {"triton._scale", "triton._shift", "torch.stack"} <= set(frame["function_name"])
    assert set(frame.loc[frame["op"] == "aten::add", "function_name"]) == {"triton._shift"}
    assert set(frame.loc[frame["op"] == "aten::mul", "function_name"]) == {"triton._scale"}


def _shift(x_ptr, out_ptr, n):
    torch.add(x_ptr, 1.0, out=out_ptr)


def test_a_grid_function_made_per_launch_is_one_sample(triton):
    class GridPerLaunch(nn.Module):
        def __init__(self):
            super().__init__()
            self.kernel = triton.JITFunction(_scale)

        def forward(self, x):
            out = torch.empty_like(x)
            for _ in range(3):  # as Triton programs do: a new grid function at every launch
                self.kernel[lambda meta: (x.numel() // meta["BLOCK"],)](x, out, x.numel(), BLOCK=16)
            return out

    profiler = ModuleFunctionKernelProfiler()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a wrong prediction of the recorded pass's samples warns
        frame, data = profiler.profile(GridPerLaunch(), [((torch.randn(4, 16),), {})], warmup_iterations=1)
    assert [calls for calls, _ in data["triton._scale"]] == [3]
    assert profiler.run.manifest["sample_keys"] == "predicted"
    assert repr(data["triton._scale"][0][1][1]["grid"]).startswith("<grid function ")


def test_no_triton_target_until_the_program_imports_triton(triton, monkeypatch):
    assert ("triton" in {name for _owner, _attribute, name in torch_call_targets()}) is True
    for name in ("triton", "triton.runtime", "triton.runtime.jit"):
        monkeypatch.delitem(sys.modules, name)
    assert "triton" not in {name for _owner, _attribute, name in torch_call_targets()}


def test_a_triton_call_is_refused_for_replay_with_its_reason():
    with pytest.raises(NotReplayable, match="Triton kernel of the model's own code"):
        resolve_call("triton._scale")
