"""What torch's own tracing runs while recorded (``torch.export`` called inside a forward, strict or not) is not the
program's: its calls and modules get no scope and no sample
(recorder/torch_tracing.py), while the program's own around it keep theirs."""

import sys

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from conftest import assert_patches_undone, snapshot_patch_targets  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return F.gelu(self.fc(x)) + 1


class ExportsItsChild(nn.Module):
    """Exports its child at each call and runs the exported program (a module it was not given: unobserved)."""

    def __init__(self, how: str):
        super().__init__()
        self.inner, self.head, self.how = Inner(), nn.Linear(8, 4), how

    def forward(self, x):
        graph = torch.export.export(self.inner, (x,), strict=self.how == "strict").module()
        return self.head(F.silu(graph(x)))


@pytest.mark.parametrize("how,warm_ups", [("non_strict", 0), ("non_strict", 1), ("strict", 1)])
def test_torch_export_inside_a_forward_is_not_recorded_as_the_programs_calls(how, warm_ups):
    model = ExportsItsChild(how).eval()
    before = snapshot_patch_targets(model)
    samples = [((torch.randn(4, 8),), {})]
    frame, data = ModuleFunctionKernelProfiler().profile(model, samples, warmup_iterations=warm_ups)
    assert set(data) == {"linear", "silu"}, "export's own calls were sampled as the program's"
    assert [calls for calls, _ in data["linear"]] == [1] and [calls for calls, _ in data["silu"]] == [1]
    assert set(frame["module_name"].astype(str)) <= {"", "head"}, "the traced child ran no call of the program"
    assert set(frame.loc[frame["module_name"] == "head", "function_name"]) == {"linear"}
    assert_patches_undone(model, before)


class TracesItsChild(nn.Module):
    """Traces its child with torch.fx at each call and runs the GraphModule (a quantization pass's calibration)."""

    def __init__(self):
        super().__init__()
        self.inner, self.head = Inner(), nn.Linear(8, 4)

    def forward(self, x):
        return self.head(F.silu(torch.fx.symbolic_trace(self.inner)(x)))


@pytest.mark.parametrize("warm_ups", [0, 3])
def test_fx_tracing_inside_a_forward_is_not_recorded_as_the_programs_calls(warm_ups):
    model = TracesItsChild().eval()
    before, trace = snapshot_patch_targets(model), torch.fx.Tracer.trace
    samples = [((torch.randn(4, 8),), {})]
    frame, data = ModuleFunctionKernelProfiler().profile(model, samples, warmup_iterations=warm_ups)
    proxies = [name for name, entries in data.items() for _, (args, kwargs) in entries
               if any(isinstance(a, torch.fx.Proxy) for a in (*args, *kwargs.values()))]  # fmt: skip
    assert not proxies, f"fx's symbolic calls were sampled as the program's: {proxies}"
    assert [calls for calls, _ in data["linear"]] == [1, 1], "the GraphModule's call of the child's Linear and head's"
    assert set(frame.loc[frame["function_name"] == "linear", "module_name"]) == {"inner.fc", "head"}
    assert torch.fx.Tracer.trace is trace
    assert_patches_undone(model, before)


class MakesFxOfItsChild(nn.Module):
    """make_fx of a closure over its child at each call: its tracing runs the child's calls on real tensors."""

    def __init__(self):
        super().__init__()
        self.inner, self.head = Inner(), nn.Linear(8, 4)

    def forward(self, x):
        from torch.fx.experimental.proxy_tensor import make_fx

        return self.head(make_fx(lambda t: F.silu(self.inner(t)))(x)(x))


def test_make_fx_inside_a_forward_keeps_the_names_of_the_kernels_its_tracing_launches():
    model = MakesFxOfItsChild().eval()
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 8),), {})])
    assert set(frame.loc[frame["function_name"] == "linear", "module_name"]) == {"inner.fc", "head"}
    assert [calls for calls, _ in data["gelu"]] == [1] and [calls for calls, _ in data["silu"]] == [1]


class SeesABinding(nn.Linear):
    """Notes, at each call, what the torch module ``module_name`` binds to export's ``_strict_export``."""

    def __init__(self, module_name: str):
        super().__init__(8, 8)
        self.module_name, self.seen = module_name, []

    def forward(self, x):
        import sys

        self.seen.append(vars(sys.modules[self.module_name]).get("_strict_export"))
        return super().forward(x)


@pytest.mark.parametrize("replaced", [False, True])
def test_a_torch_module_imported_between_recordings_has_its_binding_wrapped_and_put_back(monkeypatch, replaced):
    """The modules looked through are remembered between recordings (torch_tracing._seen): one that a later import
    adds, or puts in place of another under the same name, is looked through all the same."""
    import types

    from torch.export import _trace

    name = "torch._kernelscope_test_binds_strict_export"
    model, samples, original = SeesABinding(name).eval(), [((torch.randn(4, 8),), {})], _trace._strict_export
    first = types.ModuleType(name)  # replaced: binds nothing at all; else another object under the name
    monkeypatch.setitem(sys.modules, name, first)
    if not replaced:
        first._strict_export = None
    ModuleFunctionKernelProfiler().profile(model, samples, warmup_iterations=0)
    late = first if not replaced else types.ModuleType(name)
    late._strict_export = original  # as `from torch.export._trace import _strict_export` binds it
    monkeypatch.setitem(sys.modules, name, late)
    model.seen.clear()
    ModuleFunctionKernelProfiler().profile(model, samples, warmup_iterations=0)
    assert model.seen and all(seen is not original and seen.__wrapped__ is original for seen in model.seen)
    assert late._strict_export is original


def test_a_torch_module_removed_and_put_back_between_recordings_has_its_binding_wrapped(monkeypatch):
    """A module that left sys.modules for a recording (a test's snapshot of sys.modules, an unload and reload of the
    same object) is looked through again when it is back: its binding is wrapped in the next recording."""
    import types

    from torch.export import _trace

    name = "torch._kernelscope_test_leaves_and_comes_back"
    model, samples, original = SeesABinding(name).eval(), [((torch.randn(4, 8),), {})], _trace._strict_export
    module = types.ModuleType(name)
    module._strict_export = original
    monkeypatch.setitem(sys.modules, name, module)
    ModuleFunctionKernelProfiler().profile(model, samples, warmup_iterations=0)
    del sys.modules[name]
    model.seen.clear()
    ModuleFunctionKernelProfiler().profile(nn.Linear(8, 8).eval(), samples, warmup_iterations=0)
    sys.modules[name] = module
    ModuleFunctionKernelProfiler().profile(model, samples, warmup_iterations=0)
    assert model.seen and all(seen is not original and seen.__wrapped__ is original for seen in model.seen)
    assert module._strict_export is original
