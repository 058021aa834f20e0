"""No scope opens until the recorded pass's profiler has started (recorder/scope_gate.py): a scope entered with no
profiler running and left with one meets torch's record_function_fast assertion, which a call another thread had
open as the profiler started raised in that thread (a race no test can time: the
invariant is what this checks)."""

import pytest

torch = pytest.importorskip("torch")
from kernelscope.recorder import ModuleFunctionKernelProfiler, compiled, instrument, scope_gate, wrappers  # noqa: E402
from kernelscope.recorder.profiler import torch_profiler_running  # noqa: E402
from torch import nn  # noqa: E402


def test_no_scope_is_entered_before_the_profiler_runs(monkeypatch):
    entered = []  # whether the profiler ran as each scope was entered
    real = torch._C._profiler._RecordFunctionFast

    class Counted:
        def __init__(self, name):
            self.scope = real(name)

        def __enter__(self):
            entered.append(torch_profiler_running())
            return self.scope.__enter__()

        def __exit__(self, *exc):
            return self.scope.__exit__(*exc)

    for owner in (wrappers, instrument, compiled):
        monkeypatch.setattr(owner, "_Scope", Counted)
    model = nn.Sequential(nn.Linear(4, 4), nn.GELU(), nn.Linear(4, 4)).eval()
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2, 4),), {})], warmup_iterations=3)
    assert entered and all(entered), f"{entered.count(False)} of {len(entered)} scopes entered with no profiler"
    assert {"linear", "gelu"} <= set(frame["function_name"])
    assert scope_gate.OPEN == [True], "scopes open again once profile() is done (benchmarks scope without it)"
