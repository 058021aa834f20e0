"""Functionals a model stores at its first call (``self.act = F.gelu``, a table keyed by ``F.relu``), made inside
profile()'s patched passes (0 or 1 warm-ups), were the recorder's wrappers and stayed in the model afterwards: a
table keyed by ``F.relu`` then missed (KeyError) in the user's next call."""

import functools

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


class LazyActs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.act, self.partial, self.table, self.listed = nn.Linear(8, 8), None, None, {}, []

    def forward(self, x):
        if self.act is None:  # chosen at the first call, as models that read their config lazily do
            self.act = F.gelu
            self.table[F.relu] = F.silu
            self.partial = functools.partial(F.leaky_relu, negative_slope=0.2)
            self.listed.append(F.tanh)
        return self.listed[0](self.partial(self.table[F.relu](self.act(self.fc(x)))))


@pytest.mark.parametrize("warmup", [0, 1])
def test_functionals_a_model_stores_while_recorded_are_the_originals_afterwards(warmup):
    model = LazyActs().eval()
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2, 8),), {})], warmup_iterations=warmup)
    assert {"gelu", "silu", "leaky_relu", "tanh"} <= set(frame["function_name"]), "named while recorded"
    assert model.act is F.gelu and model.partial.func is F.leaky_relu and model.listed[0] is F.tanh
    assert list(model.table) == [F.relu] and model.table[F.relu] is F.silu
    with torch.no_grad():
        model(torch.randn(2, 8))  # the user's next call


_ACTS: dict = {}  # a global of the model's own code, filled at its first call
_CHOSEN: list = []


class GlobalCache(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        if not _ACTS:
            _ACTS[F.relu] = F.silu
            _ACTS["act"] = F.gelu
            _CHOSEN.append(F.tanh)
        return _CHOSEN[0](_ACTS["act"](_ACTS[F.relu](self.fc(x))))


@pytest.mark.parametrize("warmup", [0, 1])
def test_functionals_the_models_own_globals_store_while_recorded_are_the_originals_afterwards(warmup):
    _ACTS.clear()
    _CHOSEN.clear()
    model = GlobalCache().eval()
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2, 8),), {})], warmup_iterations=warmup)
    assert {"gelu", "silu", "tanh"} <= set(frame["function_name"]), "named while recorded"
    assert list(_ACTS) == [F.relu, "act"] and _ACTS[F.relu] is F.silu and _ACTS["act"] is F.gelu
    assert _CHOSEN == [F.tanh] and _CHOSEN[0] is F.tanh
