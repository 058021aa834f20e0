"""Compiled frames that the recorder's own code runs inside of (test_compiled.py's models and helpers): a wrapper
called inside a compiled frame, and the mode a default device puts around every call."""

import types

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from test_compiled import Branchy, _profile, _run, _samples, assert_every_kernel_named  # noqa: E402
from torch import nn  # noqa: E402


class _ScaledPick(nn.Module):
    """A model calling a function compiled with dynamic shapes that takes a Python float, as torchvision's pure-torch
    roi_align does in every R-CNN: the compiled frame turns the float into a tensor (torch._as_tensor_fullprec, then
    the patched torch.as_tensor) before its graph runs, so a wrapper is called inside the compiled frame."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

        @torch.compile(dynamic=True, backend="eager")
        def pick(x, index, scale: float):
            return F.relu(x[index] * scale)

        self.pick = pick

    def forward(self, x):
        return self.pick(F.gelu(self.fc(x)), torch.arange(2), 0.25)


@pytest.mark.parametrize("warmup_iterations", [3, 1])
def test_a_wrapper_called_inside_a_compiled_frame_keeps_its_books_unseen_by_dynamo(warmup_iterations, tmp_path):
    """The wrapper's first call of a name and of a signature runs code dynamo never saw (the sample book's, contextlib's
    nullcontext in place of a closed scope), which the kept compiled code's stance refuses: every pass fell back to
    module scopes only, no call named by function."""
    torch.manual_seed(0)
    model = _ScaledPick().eval()
    samples = [((torch.randn(4, 8),), {})]
    expected = _run(model, samples) + _run(model, samples)  # compiled as the user runs it
    profiler, frame, _, warned = _profile(model, samples, tmp_path, warmup_iterations=warmup_iterations)
    assert warned == [] and profiler.run.manifest["compiled_code"] == "kept"
    assert_every_kernel_named(frame)
    named = frame.groupby("module_name")["function_name"].agg(set).to_dict()
    assert named["fc"] == {"linear"}
    assert {"gelu", "torch.arange", "torch.compile", "torch.as_tensor"} <= named[""]
    assert all(torch.equal(a, b) for a, b in zip(_run(model, samples), expected[:1], strict=True))


def test_compiled_code_under_a_default_device_runs_its_entries_while_recorded(tmp_path):
    """A default device (``torch.set_default_device``, ``with torch.device(...)``: every program on CUDA that sets one)
    puts its mode around every call, so a wrapper called at a graph break of compiled code asks torch for the mode
    stack (identity_handlers.py): torch's own Python code, which the kept code's stance refused as unseen on every
    pass, so every pass fell back to module scopes only (seen with transformers' compiled static-cache generate)."""
    forward = types.FunctionType(Branchy.forward.__code__.replace(), Branchy.forward.__globals__)
    model = type("NewBranchy", (Branchy,), {"forward": forward})().eval()  # code dynamo has compiled nothing of
    compiled = torch.compile(model, backend="eager")
    samples = _samples()
    with torch.device("cpu"):
        expected = _run(compiled, samples)
        profiler, frame, _, warned = _profile(compiled, samples, tmp_path, module=model, warmup_iterations=3)
        assert warned == [] and profiler.run.manifest["compiled_code"] == "kept"
        assert {"Tensor.__bool__", "Tensor.item"} <= set(frame["function_name"])
        assert all(torch.equal(a, b) for a, b in zip(_run(compiled, samples), expected, strict=True))
