"""torch.autograd.Function subclasses of the program's own are calls named ``<Function>.apply``: extension code
wraps the kernels it launches itself (no torch operator around them) in one. The calls it makes keep their own
names, torch's own Functions get no scope, and the class is put back exactly."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.replay import NotReplayable, resolve_call  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402


class Fused(torch.autograd.Function):
    """Stands in for an extension's Function: its forward's own work (``torch.ops.aten`` called directly, as
    an extension's C++ would launch it: no patched call reaches it) and calls the recorder sees."""

    @staticmethod
    def forward(ctx, x, weight):
        own = torch.ops.aten.sigmoid.default(x)
        return F.relu(own) @ weight + torch.mul(own, 2.0)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class UsesFused(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.weight = nn.Parameter(torch.randn(16, 16))

    def forward(self, x):
        return Fused.apply(self.fc(x), self.weight)


def _profile(model, **kwargs):
    return ModuleFunctionKernelProfiler(**kwargs).profile(model, [((torch.randn(4, 16),), {})], warmup_iterations=1)


def test_an_autograd_function_is_a_call_and_the_calls_it_makes_keep_their_names():
    apply = vars(torch.autograd.Function)["apply"]
    frame, data = _profile(UsesFused().eval())
    by_op = frame.groupby("op")["function_name"].agg(set).to_dict()
    assert by_op["aten::sigmoid"] == {"Fused.apply"}, "what nothing inside names is the Function's"
    assert by_op["aten::relu"] == {"relu"} and by_op["aten::mul"] == {"torch.mul"}
    assert by_op["aten::addmm"] == {"linear"} and frame["function_name"].notna().all()
    assert [calls for calls, _ in data["Fused.apply"]] == [1]
    args, _kwargs = data["Fused.apply"][0][1]
    assert args[0] is Fused and [tuple(a.shape) for a in args[1:]] == [(4, 16), (16, 16)]
    assert vars(torch.autograd.Function)["apply"] is apply, "the class is put back exactly"


def test_torch_s_own_functions_get_no_scope():
    class Checkpointed(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 16)

        def forward(self, x):
            return checkpoint(self.fc, x, use_reentrant=True)  # torch.utils.checkpoint.CheckpointFunction

    x = torch.randn(4, 16, requires_grad=True)
    frame, _ = ModuleFunctionKernelProfiler().profile(Checkpointed(), [((x,), {})], warmup_iterations=1)
    assert not any(name.endswith(".apply") for name in frame["function_name"].dropna())
    assert "linear" in set(frame["function_name"])


def test_functional_mode_does_not_scope_autograd_functions():
    frame, data = _profile(UsesFused().eval(), calls="functional")
    assert "Fused.apply" not in data and "Fused.apply" not in set(frame["function_name"].dropna())


def test_an_autograd_function_call_is_refused_for_replay_with_its_reason():
    with pytest.raises(NotReplayable, match="autograd Function of the model's own code"):
        resolve_call("Fused.apply")


class Options:
    """Compared by identity, as most classes are."""

    def __init__(self, scale: float):
        self.scale = scale


class Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, options):
        return x * options.scale

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class MakesOptionsEveryPass(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return Scaled.apply(self.fc(x), Options(2.0)) + Scaled.apply(x, Options(3.0))


def test_an_argument_made_anew_in_every_pass_keeps_the_predicted_keys():
    """Keyed by its identity, such an argument never equals the warm-up's, though the calls are the same: the
    recorded pass keeps the sample ids predicted from the warm-up, with no second recording and no warning."""
    import warnings

    samples = [((torch.randn(4, 16),), {})]
    profiler = ModuleFunctionKernelProfiler()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame, data = profiler.profile(MakesOptionsEveryPass().eval(), samples, warmup_iterations=3)
    assert [str(w.message) for w in caught if str(w.message).startswith("kernelscope")] == []
    assert profiler.run.manifest["sample_keys"] == "predicted"
    calls = frame[frame["function_name"] == "Scaled.apply"]
    assert set(calls["sample_id"]) == {0, 1} and len(data["Scaled.apply"]) == 2, "the two options are two samples"
