"""TorchScript compiling Python code while recorded (``torch.jit.script`` in a forward, or torch's own lazy imports
that script functions: forward-mode AD's first ``make_dual`` scripts torch._decomp.decompositions_for_jvp) resolved
the patched names to the recorder's wrappers, which it cannot compile: profile() raised TypeError (inspect reading
the source of a builtin behind ``__wrapped__``)."""

import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


class ScriptsEachCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        def act(t: torch.Tensor) -> torch.Tensor:  # a new function at each call: scripted each time
            return torch.tanh(F.gelu(t))

        return torch.jit.script(act)(self.fc(x))


def test_a_function_scripted_while_recorded_compiles_and_runs():
    model, x = ScriptsEachCall().eval(), torch.randn(2, 8)
    with torch.no_grad():
        expected = model(x)
    outputs = []
    frame, _ = ModuleFunctionKernelProfiler().profile(lambda t: outputs.append(model(t)), [((x,), {})],
                                                      module=model, warmup_iterations=1)  # fmt: skip
    assert torch.equal(outputs[-1], expected) and "linear" in set(frame["function_name"])


def test_the_first_forward_mode_ad_of_a_process_while_recorded():
    script = textwrap.dedent(
        """
        import sys, torch
        from torch import nn
        from kernelscope.recorder import ModuleFunctionKernelProfiler
        assert "torch._decomp.decompositions_for_jvp" not in sys.modules
        class Jvp(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                return torch.func.jvp(self.fc, (x,), (torch.ones_like(x),))[1]
        ModuleFunctionKernelProfiler().profile(Jvp(), [((torch.randn(2, 4),), {})], warmup_iterations=0)
        print("recorded")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "recorded" in done.stdout, done.stderr[-2000:]


def test_a_module_scripted_for_the_first_time_while_recorded():
    """TorchScript resolved the names of a patched forward through the wrapper's globals (the recorder's): undefined
    value F."""

    class Child(nn.Module):  # defined here: TorchScript has compiled no type of it yet
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            return F.gelu(self.fc(x))

    class Scripts(nn.Module):
        def __init__(self):
            super().__init__()
            self.child = Child()

        def forward(self, x):
            return torch.jit.script(self.child)(x)

    model, x = Scripts().eval(), torch.randn(2, 8)
    outputs = []
    ModuleFunctionKernelProfiler().profile(lambda t: outputs.append(model(t)), [((x,), {})], module=model,
                                           warmup_iterations=0)  # fmt: skip
    with torch.no_grad():
        assert torch.equal(outputs[-1], model.child(x))


def test_the_wrappers_builtin_entries_are_made_once_and_again_for_a_new_builtin():
    # each recording read its ~1,400 wrappers against the builtin table (~0.4 ms of a small model's profile()); the
    # entries are kept for the same wrappers while the table does not grow, and put in and taken out as before
    from kernelscope.recorder import torchscript
    from kernelscope.recorder.wrappers import patch_plan
    from torch.jit import _builtins

    table, wrappers = _builtins._get_builtin_table(), patch_plan("all").wrappers
    before = dict(table)
    with torchscript.scripting_sees_originals(wrappers):
        first = torchscript._entries[2]
        assert first and all(table[key] == name for key, name in first.items())
    assert table == before
    with torchscript.scripting_sees_originals(wrappers):
        assert torchscript._entries[2] is first
    assert table == before
    original, wrapper = next((o, w) for key, o in patch_plan("all").originals.items()
                             if key not in table and (w := wrappers[key]) is not None)  # fmt: skip
    try:
        _builtins._register_builtin(original, "aten::ks_test_op")
        with torchscript.scripting_sees_originals(wrappers):
            assert torchscript._entries[2] is not first and table[id(wrapper)] == "aten::ks_test_op"
    finally:
        table.pop(id(original), None)
    assert id(wrapper) not in table
