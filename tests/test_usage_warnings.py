"""profile()'s warnings about how it was called: a model left in training mode (naming the modules whose forward
reads ``self.training``; a model in eval mode, or one whose modules compute alike in both modes, records without a
word), and function_names that named none of the pass's calls."""

import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


class OwnDropout(nn.Module):
    """The user's own module that reads the mode, as transformers' attention layers do."""

    def forward(self, x):
        return F.dropout(x, 0.5, self.training)


def _warnings_of(model, about: str = "training mode", function_names=None) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profiler = ModuleFunctionKernelProfiler(function_names)
        profiler.profile(model, [((torch.randn(2, 4),), {})], warmup_iterations=0)
    return [str(w.message) for w in caught if about in str(w.message)]


def test_a_model_in_training_mode_warns_naming_what_the_mode_changes():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), OwnDropout(), nn.Dropout())
    assert _warnings_of(model) == [
        "kernelscope: the model is in training mode: its modules BatchNorm1d, Dropout, OwnDropout run as in training, "
        "not as in inference; call model.eval() before recording"
    ]


def test_a_model_in_eval_mode_or_alike_in_both_records_without_the_warning():
    assert _warnings_of(nn.Sequential(nn.Linear(4, 4), nn.Dropout()).eval()) == []
    assert _warnings_of(nn.Sequential(nn.Linear(4, 4), nn.ReLU())) == [], "training mode changes nothing here"


def test_the_warning_points_at_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ModuleFunctionKernelProfiler().profile(nn.Dropout(), [((torch.randn(2),), {})], warmup_iterations=0)
    assert [w.filename for w in caught if "training mode" in str(w.message)] == [__file__]


class NeedsItsParent(nn.Module):
    """A forward that is a property readable only inside its parent's forward (recorder/class_forwards.py)."""

    @property
    def forward(self):
        raise RuntimeError("read outside the parent's forward")


def test_modules_without_a_mode_or_a_readable_forward_neither_warn_nor_fail():
    """A frozen TorchScript module has no ``training`` attribute: profile() raised AttributeError on it, before any
    pass, and so on a property forward whose getter raises (found running the sweep's jit_freeze on a GPU)."""
    frozen = torch.jit.freeze(torch.jit.script(nn.Sequential(nn.Linear(4, 4), nn.Dropout()).eval()))
    assert not hasattr(frozen, "training")
    assert _warnings_of(frozen) == []

    class Parent(nn.Module):
        def __init__(self):
            super().__init__()
            self.child = NeedsItsParent()

        def forward(self, x):
            return x + 1

    assert _warnings_of(Parent()) == []


def test_function_names_that_name_none_of_the_calls_warn_listing_the_calls():
    """function_names={"Linear"} (the module's class, not its call) kept no input, silently."""
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval()
    assert _warnings_of(model, "function_names", {"Linear"}) == [
        "kernelscope: function_names ['Linear'] named none of the calls the recorded pass made (linear, relu): no "
        "inputs were kept; name them as function_name shows them"
    ]
    assert _warnings_of(model, "function_names", {"linear", "conv2d"}) == [], "a broad set, one name matching"
    assert _warnings_of(model, "function_names", set()) == [], "none asked for: nothing missed"
