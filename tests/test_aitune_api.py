"""aitune 0.6.0's ModuleFunctionKernelProfiler API, the floor kernelscope's is held to: the keyword its profile()
names the model by, and get_functions_to_patch()."""

import inspect

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


def _aitune_rule(namespace) -> list[str]:
    """aitune's _should_patch, written out: public Python or built-in functions defined in the namespace, in torch
    or in torch._C._nn."""
    owners = {namespace.__name__, "torch", "torch._C._nn"}
    return [
        name
        for name, value in vars(namespace).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or inspect.isbuiltin(value))
        and getattr(value, "__module__", None) in owners
    ]


def test_profile_takes_the_model_as_function_too():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    sample = [((torch.randn(2, 4),), {})]
    by_keyword, data = ModuleFunctionKernelProfiler().profile(function=model, data=sample, warmup_iterations=1)
    positional, _ = ModuleFunctionKernelProfiler().profile(model, sample, warmup_iterations=1)
    assert list(by_keyword["function_name"]) == list(positional["function_name"])
    assert set(data) == {"linear", "relu"}


@pytest.mark.parametrize("arguments", [{}, {"fn": nn.Identity(), "function": nn.Identity()}], ids=["none", "both"])
def test_profile_takes_one_model(arguments):
    with pytest.raises(TypeError, match="fn \\(or function="):
        ModuleFunctionKernelProfiler().profile(**arguments)


def test_the_functions_to_patch_are_aitunes_and_the_originals_even_while_recorded():
    profiler = ModuleFunctionKernelProfiler()
    expected = _aitune_rule(F)
    listed = profiler.get_functions_to_patch()
    assert [name for name, _ in listed] == expected
    assert all(function is getattr(F, name) for name, function in listed)
    seen = []

    class Asking(nn.Module):
        def forward(self, x):
            seen.append(profiler.get_functions_to_patch(F))
            return F.relu(x)

    ModuleFunctionKernelProfiler().profile(Asking(), [((torch.randn(2),), {})], warmup_iterations=3)
    assert seen and all(pairs == listed for pairs in seen)  # while recorded F holds wrappers, not these


def test_torch_level_calls_are_listed_only_where_they_get_scopes():
    everything = ModuleFunctionKernelProfiler().get_functions_to_patch(torch)
    assert ("addmm", torch.addmm) in everything and ("matmul", torch.matmul) in everything
    assert ModuleFunctionKernelProfiler(calls="functional").get_functions_to_patch(torch) == []
    assert ModuleFunctionKernelProfiler().get_functions_to_patch(inspect) == []
