"""Functionals held by reference in containers and objects beyond the first level the scan of stored references
read (recorder/stored_references.py): an OrderedDict and a defaultdict of activations, a registry of registries, a
config object held as a class attribute, the values of Enum members (``class Act(Enum): GELU = F.gelu``), registries
held as class attributes, the slots of a config without a ``__dict__`` (``@dataclass(slots=True, frozen=True)``),
the defaults of a lambda held as an attribute. Each was called unseen by the namespace patch, its kernels named after
its operator (``aten::elu``)."""

import collections
import dataclasses
import enum
import functools
import sys
import types

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


class HeldDeeper(nn.Module):
    SETTINGS = types.SimpleNamespace(act=F.silu)  # a config object as a class attribute

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.ordered = collections.OrderedDict(act=F.elu)
        self.defaulted = collections.defaultdict(lambda: F.relu6, {"act": F.hardtanh})
        self.registries = {"vision": {"act": F.tanhshrink}, "text": [F.softsign]}

    def forward(self, x):
        x = self.SETTINGS.act(self.fc(x))
        x = self.defaulted["act"](self.ordered["act"](x))
        return self.registries["text"][0](self.registries["vision"]["act"](x))


def test_functionals_in_ordered_and_default_dicts_nested_registries_and_class_held_configs_are_named_and_put_back():
    model = HeldDeeper().eval()
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 16),), {})], warmup_iterations=1)
    named = set(frame["function_name"].dropna())
    assert named >= {"linear", "silu", "elu", "hardtanh", "tanhshrink", "softsign"}, named
    assert not any(name.startswith(("aten::", "Tensor.", "torch.")) for name in named), named
    assert all([calls for calls, _ in data[name]] == [1] for name in ("silu", "elu", "hardtanh", "tanhshrink"))
    assert HeldDeeper.SETTINGS.act is F.silu and model.ordered["act"] is F.elu and model.defaulted["act"] is F.hardtanh
    assert model.registries["vision"]["act"] is F.tanhshrink and model.registries["text"][0] is F.softsign


class ImportsInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        import ks_lazy_acts  # a lazy import: no module's globals hold the module
        from ks_lazy_acts import TABLE

        return TABLE["relu"](ks_lazy_acts.ACT(self.fc(x)))


def test_functionals_held_by_a_module_a_forward_imports_in_its_body_are_named_and_put_back(tmp_path, monkeypatch):
    source = 'import torch.nn.functional as F\nACT = F.gelu\nTABLE = {"relu": F.relu}\n'
    (tmp_path / "ks_lazy_acts.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "ks_lazy_acts", raising=False)
    model = ImportsInForward().eval()
    with torch.no_grad():
        model(torch.randn(4, 16))  # imported before the recording, by a first call of the model's
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 16),), {})], warmup_iterations=1)
    named = set(frame["function_name"].dropna())
    assert {"gelu", "relu"} <= named and not named & {"aten::gelu", "torch.relu"}, named
    late = sys.modules["ks_lazy_acts"]
    assert late.ACT is F.gelu and late.TABLE["relu"] is F.relu


class PackageSettings:
    def __init__(self):
        self.act = F.gelu


PackageSettings.__module__ = "torchtune_like.config"  # a package whose name begins with "torch", not torch's own


class HoldsPackageSettings(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.settings = nn.Linear(8, 8), PackageSettings()

    def forward(self, x):
        return self.settings.act(self.fc(x))


def test_a_config_object_of_a_package_named_torch_something_is_looked_into():
    model = HoldsPackageSettings().eval()
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2, 8),), {})], warmup_iterations=1)
    assert "gelu" in set(frame["function_name"]) and model.settings.act is F.gelu


class Act(enum.Enum):
    RELU = functools.partial(F.relu)
    GELU = F.gelu
    SILU = enum.member(F.silu)

    def __call__(self, x):
        return self.value(x)


DEFAULT_ACT = Act.GELU


class EnumActivations(nn.Module):
    class Norm(enum.Enum):  # an Enum defined in the model's class
        SOFTSIGN = enum.member(F.softsign)

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        x = Act["RELU"].value(self.fc(x))
        x = self.Norm.SOFTSIGN.value(Act.SILU(x))
        assert Act(F.gelu) is Act.GELU  # looked up by its value, the wrapper while recorded
        return DEFAULT_ACT.value(x)


def test_functionals_held_as_enum_member_values_are_named_and_put_back():
    frame, data = ModuleFunctionKernelProfiler().profile(EnumActivations(), [((torch.randn(4, 16),), {})],
                                                         warmup_iterations=1)  # fmt: skip
    named = set(frame["function_name"].dropna())
    assert named >= {"linear", "relu", "silu", "softsign", "gelu"}, named
    assert not any(name.startswith(("aten::", "Tensor.", "torch.")) for name in named), named
    assert all([calls for calls, _ in data[name]] == [1] for name in ("relu", "silu", "softsign", "gelu")), data.keys()
    assert Act.GELU.value is F.gelu and Act.SILU.value is F.silu and Act.RELU.value.func is F.relu
    assert EnumActivations.Norm.SOFTSIGN.value is F.softsign and Act(F.gelu) is Act.GELU


@dataclasses.dataclass(slots=True, frozen=True)
class SlottedConfig:
    act: object = F.hardswish
    norm: object = F.softsign


class HeldInSlotsAndDefaults(nn.Module):
    SHARED = SlottedConfig(act=F.mish)  # a class attribute, one level as a config object's

    def __init__(self):
        super().__init__()
        self.fc, self.cfg = nn.Linear(16, 16), SlottedConfig()
        self.gate = lambda x, act=F.silu, *, scale=F.sigmoid: act(x) * scale(x)

    def forward(self, x):
        x = self.cfg.norm(self.cfg.act(self.fc(x)))
        return self.SHARED.act(self.gate(x))


def test_functionals_in_slots_of_a_frozen_config_and_in_a_held_lambdas_defaults_are_named_and_put_back():
    model = HeldInSlotsAndDefaults().eval()
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 16),), {})], warmup_iterations=1)
    named = set(frame["function_name"].dropna())
    assert named >= {"linear", "hardswish", "softsign", "mish", "silu", "sigmoid"}, named
    assert not any(name.startswith("aten::") for name in named), named
    assert all([calls for calls, _ in data[name]] == [1] for name in ("hardswish", "softsign", "mish", "silu"))
    assert model.cfg.act is F.hardswish and model.cfg.norm is F.softsign and model.SHARED.act is F.mish
    assert model.gate.__defaults__ == (F.silu,) and model.gate.__kwdefaults__ == {"scale": F.sigmoid}


class RegistryOnTheClass(nn.Module):
    ACTIVATIONS = {"elu": F.elu, "nested": {"celu": F.celu}}  # a registry as a class attribute
    PAIR = (F.selu, F.tanhshrink)

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        x = self.ACTIVATIONS["nested"]["celu"](self.ACTIVATIONS["elu"](self.fc(x)))
        return self.PAIR[1](self.PAIR[0](x))


def test_functionals_in_registries_held_as_class_attributes_are_named_and_put_back():
    pair, registry = RegistryOnTheClass.PAIR, RegistryOnTheClass.ACTIVATIONS
    frame, data = ModuleFunctionKernelProfiler().profile(RegistryOnTheClass(), [((torch.randn(4, 16),), {})],
                                                         warmup_iterations=1)  # fmt: skip
    named = set(frame["function_name"].dropna())
    assert named >= {"linear", "elu", "celu", "selu", "tanhshrink"}, named
    assert not any(name.startswith(("aten::", "torch.")) for name in named), named
    assert all([calls for calls, _ in data[name]] == [1] for name in ("elu", "celu", "selu", "tanhshrink"))
    assert RegistryOnTheClass.PAIR is pair and RegistryOnTheClass.ACTIVATIONS is registry
    assert registry == {"elu": F.elu, "nested": {"celu": F.celu}} and pair == (F.selu, F.tanhshrink)


class StaticGelu(nn.Module):
    forward = staticmethod(F.gelu)  # the functional itself is the class's forward


class InstanceSoftmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.forward = functools.partial(F.softmax, dim=-1)  # an instance's forward, found before the class's


class ForwardsThatAreFunctionals(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.act, self.norm = nn.Linear(16, 16), StaticGelu(), InstanceSoftmax()

    def forward(self, x):
        return self.norm(self.act(self.fc(x)))


def test_a_functional_that_is_a_modules_forward_is_named_in_the_modules_scope_and_put_back():
    model = ForwardsThatAreFunctionals().eval()
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 16),), {})], warmup_iterations=1)
    rows = frame[frame["function_name"].isin(["gelu", "softmax"])]
    named = set(zip(rows["function_name"], rows["module_name"], strict=True))
    assert named == {("gelu", "act"), ("softmax", "norm")}, frame
    assert [calls for calls, _ in data["gelu"]] == [1] and [calls for calls, _ in data["softmax"]] == [1]
    assert vars(StaticGelu)["forward"].__func__ is F.gelu and "forward" not in vars(model.act)
    assert model.norm.forward.func is F.softmax and model.norm.forward.keywords == {"dim": -1}


class SiluCall:
    def __init__(self):
        self.fn = F.silu

    def __call__(self, x):
        return self.fn(x)


def _closing_forward(module: nn.Module) -> nn.Module:
    act = F.gelu
    module.forward = lambda x: act(x)  # a closure over the functional, set as the instance's forward
    return module


class ForwardsHoldingFunctionals(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.a, self.b, self.c = nn.Linear(16, 16), _closing_forward(nn.Module()), nn.Module(), nn.Module()
        self.b.forward = SiluCall()  # a callable object of the model's own holding the functional
        self.c.forward = lambda x, act=F.elu: act(x)  # the functional as a default of the instance's forward

    def forward(self, x):
        return self.c(self.b(self.a(self.fc(x))))


def test_functionals_held_by_an_instances_own_forward_are_named_in_its_scope_and_put_back():
    model = ForwardsHoldingFunctionals().eval()
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 16),), {})], warmup_iterations=1)
    named = set(zip(frame["function_name"], frame["module_name"], strict=True))
    assert named == {("linear", "fc"), ("gelu", "a"), ("silu", "b"), ("elu", "c")}, named
    assert model.a.forward.__closure__[0].cell_contents is F.gelu and model.b.forward.fn is F.silu
    assert model.c.forward.__defaults__ == (F.elu,)


def _lambda_forward_class() -> type:
    act = F.celu  # a local alias the class's lambda forward closes over

    class LambdaClosingOverAnAlias(nn.Module):
        forward = lambda self, x: act(x)  # noqa: E731 (the class-level lambda forward is the case)

    return LambdaClosingOverAnAlias


def _aliased(alias):
    return lambda self, x: alias(x) * 2


class LambdaMadeInTheClassBody(nn.Module):
    _act = F.selu
    forward = _aliased(_act)  # a lambda made from an alias the class body defines, closing over it


class LambdaForwards(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.a, self.b = nn.Linear(16, 16), _lambda_forward_class()(), LambdaMadeInTheClassBody()

    def forward(self, x):
        return self.b(self.a(self.fc(x)))


def test_a_class_level_lambda_forward_closing_over_a_functional_is_named_in_its_scope_and_put_back():
    model = LambdaForwards().eval()
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 16),), {})], warmup_iterations=1)
    named = {pair for pair in zip(frame["function_name"], frame["module_name"], strict=True)}
    assert {("celu", "a"), ("selu", "b")} <= named, named
    assert not any(name.startswith("aten::") for name, _ in named), named
    assert [calls for calls, _ in data["celu"]] == [1] and [calls for calls, _ in data["selu"]] == [1]
    assert vars(type(model.a))["forward"].__closure__[0].cell_contents is F.celu
    assert vars(LambdaMadeInTheClassBody)["forward"].__closure__[0].cell_contents is F.selu
