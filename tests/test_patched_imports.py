"""No module is imported while the functions are patched: module-level code that stores torch functions (dynamo's
tables of torch functions, inductor's) would keep the wrappers for the rest of the process.

torch.profiler's first start in a process runs ``hasattr(torch, "_inductor")``, which imports inductor and dynamo
(torch 2.11–2.13); the first recording in a fresh process must not do that inside the patched window."""

import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

SCRIPT = textwrap.dedent(
    """
    import builtins, sys, tempfile
    import torch
    import torch.nn.functional as F
    from torch import nn
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    original = F.linear
    imported_while_patched = []
    real_import = builtins.__import__

    def watching_import(name, globals=None, locals=None, fromlist=(), level=0):
        before = set(sys.modules)
        module = real_import(name, globals, locals, fromlist, level)
        if F.linear is not original:
            imported_while_patched.extend(sorted(set(sys.modules) - before - set(imported_while_patched)))
        return module

    builtins.__import__ = watching_import
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    out = tempfile.mkdtemp() + "/run"
    ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2, 4),), {})], warmup_iterations=3, out=out)
    assert F.linear is original
    print("torch._dynamo" in sys.modules, imported_while_patched)
    """
)


def test_the_first_recording_of_a_process_imports_nothing_while_patched():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    dynamo_loaded, imported = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert imported == "[]", f"imported while patched: {imported[:300]}"
    assert dynamo_loaded == "True", "torch.profiler's first start imports dynamo: here before the patches"


LATE_MODULE = """
import torch.nn.functional as F
from torch.nn.functional import silu

ACT = F.gelu
ACTS = {"relu": F.relu}


class Holder:
    act = F.hardtanh


def helper(x, norm=F.softsign):
    return norm(x)
"""


class ImportsAtFirstCall(torch.nn.Module):
    def __init__(self, name):
        super().__init__()
        self.fc, self.name = torch.nn.Linear(8, 8), name

    def forward(self, x):
        late = __import__(self.name)  # a lazy import at the first call, as libraries make
        return late.helper(late.ACTS["relu"](late.silu(late.ACT(self.fc(x)))))


@pytest.mark.parametrize("warmup", [0, 1])
def test_a_module_the_model_imports_while_recorded_keeps_the_originals_afterwards(tmp_path, monkeypatch, warmup):
    """Its module-level code stored the wrappers, which stayed in it past the recording."""
    import torch.nn.functional as F  # noqa: N812
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    name = f"late_module_{warmup}"
    (tmp_path / f"{name}.py").write_text(LATE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    frame, _ = ModuleFunctionKernelProfiler().profile(ImportsAtFirstCall(name), [((torch.randn(2, 8),), {})],
                                                      warmup_iterations=warmup)  # fmt: skip
    late = sys.modules[name]
    assert {"gelu", "silu", "relu", "softsign"} <= set(frame["function_name"]), "named while recorded"
    assert late.ACT is F.gelu and late.silu is F.silu and late.ACTS["relu"] is F.relu
    assert vars(late.Holder)["act"] is F.hardtanh and late.helper.__defaults__[0] is F.softsign


REGISTRY_MODULE = """
import torch
import torch.nn.functional as F

LOWERINGS = {i: i for i in range(2000)}  # a registry larger than any container the scan of references reads
LOWERINGS.update({torch.full: "full", F.relu: "relu"})
NEEDS_REALIZED = {torch.empty, F.gelu}


def lowered(x):
    return LOWERINGS[F.relu], LOWERINGS[torch.full], F.gelu in NEEDS_REALIZED
"""


def test_a_registry_keyed_by_functions_that_the_model_imports_while_recorded_is_keyed_by_the_originals(
    tmp_path, monkeypatch
):
    """Inductor's lowering table (``register_lowering([torch.full, aten.full])``), imported at the first lazy
    torch.compile of a forward (transformers' flex_attention), was keyed by the wrappers: after the recording no
    compile could lower ``torch.full`` (SubgraphLoweringException) for the rest of the process."""
    import torch.nn.functional as F  # noqa: N812
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    name = "late_registry"
    (tmp_path / f"{name}.py").write_text(REGISTRY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)

    class Registers(torch.nn.Module):
        def forward(self, x):
            return x * len(__import__(name).lowered(x))

    ModuleFunctionKernelProfiler().profile(Registers(), [((torch.randn(2, 8),), {})], warmup_iterations=0)
    late = sys.modules[name]
    assert late.lowered(None) == ("relu", "full", True)
    assert all(key is F.relu or key is torch.full or type(key) is int for key in late.LOWERINGS)
    assert late.NEEDS_REALIZED == {torch.empty, F.gelu} and len(late.LOWERINGS) == 2002


def test_a_module_imported_while_recorded_after_the_functions_changed_gets_the_new_originals(tmp_path, monkeypatch):
    """The wrappers' maps are made with their patch plan (wrappers.PatchPlan.by_wrapper): a functional the program
    replaced since the last recording gets a plan, and wrapper, of its own, which a module imported while recorded
    gives back."""
    import torch.nn.functional as F  # noqa: N812
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    samples = [((torch.randn(2, 8),), {})]
    ModuleFunctionKernelProfiler().profile(torch.nn.Linear(8, 8).eval(), samples, warmup_iterations=0)
    gelu = F.gelu

    def own_gelu(x, approximate="none"):
        return gelu(x, approximate=approximate)

    monkeypatch.setattr(F, "gelu", own_gelu)
    name = "late_module_after_a_change"
    (tmp_path / f"{name}.py").write_text(LATE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    ModuleFunctionKernelProfiler().profile(ImportsAtFirstCall(name), samples, warmup_iterations=0)
    assert sys.modules[name].ACT is own_gelu and F.gelu is own_gelu
