"""Functionals a model stores at its first call (``self.act = F.gelu``, a table keyed by ``F.relu``), made inside
profile()'s patched passes (0 or 1 warm-ups), were the recorder's wrappers and stayed in the model afterwards: a
table keyed by ``F.relu`` then missed (KeyError) in the user's next call."""

import functools
import sys

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


_OPS = """import torch.nn.functional as F
ACT, CACHE = None, {}
def act(x):
    global ACT
    if ACT is None:  # chosen at the first call
        ACT = F.gelu
        CACHE[F.relu] = F.silu
    return CACHE[F.relu](ACT(x))
"""
_BASE = """import torch.nn.functional as F
from torch import nn
ACT = None
class Base(nn.Module):
    def forward(self, x):
        global ACT
        if ACT is None:
            ACT = F.tanh
        return ACT(self.fc(x))
"""
_MODEL = """from torch import nn
from .ops import act
from .base import Base
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
    def forward(self, x):
        return act(self.fc(x))
class Derived(Base):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
"""


@pytest.mark.parametrize("warmup", [0, 1])
def test_globals_of_a_helper_module_and_of_a_base_class_module_written_while_recorded_are_put_back(
    warmup, tmp_path, monkeypatch
):
    """The model's code beyond the module defining its class: a helper of the same package it imports from
    (``from .ops import act``, whose ``act`` caches F.gelu at its first call) and the module of a base class whose
    forward runs (``class Derived(Base)``); both kept the wrappers."""
    package = tmp_path / "ks_written"
    package.mkdir()
    for name, source in {"__init__": "", "ops": _OPS, "base": _BASE, "model": _MODEL}.items():
        (package / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [n for n in sys.modules if n.startswith("ks_written")]:
        monkeypatch.delitem(sys.modules, name)
    from ks_written import base, model, ops

    for made, named in ((model.Model, {"gelu", "silu"}), (model.Derived, {"tanh"})):
        samples = [((torch.randn(2, 8),), {})]
        frame, _ = ModuleFunctionKernelProfiler().profile(made().eval(), samples, warmup_iterations=warmup)
        assert named <= set(frame["function_name"]), "named while recorded"
    assert ops.ACT is F.gelu and list(ops.CACHE) == [F.relu] and ops.CACHE[F.relu] is F.silu
    assert base.ACT is F.tanh
