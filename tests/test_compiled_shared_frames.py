"""A frame that many models share, compiled for the first that ran it: torch.cond's wrapper is made afresh at each
call from one code, so its entries are one list for every model. Under the recorder's stance (compiled.py,
``compiled_code_kept``) only the guards that failed before run, so a model whose first call is profile() (no warm-up)
ran the entry compiled for another model, whose code read that model's submodule from it (``KeyError: 'yes'``)."""

import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.compiled import compiled_entries  # noqa: E402
from kernelscope.recorder.stance_refusals import ran_another_objects_entry  # noqa: E402
from torch import nn  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(torch, "cond"), reason="torch.cond is torch 2.5 and later")


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.norm = nn.Linear(8, 16), nn.Linear(16, 8), nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(self.fc2(F.gelu(self.fc1(x))) + x)


class Yes(nn.Module):
    def __init__(self):
        super().__init__()
        self.yes, self.no = Mlp(), Mlp()

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: F.relu(self.yes(t)), lambda t: F.gelu(self.no(t)), (x,))


class Other(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        def inner(t):
            return torch.cond(t.mean() > 0, lambda u: F.relu(self.b(u)), lambda u: torch.tanh(u), (t,))

        return torch.cond(x.sum() > 0, inner, lambda t: F.gelu(self.a(t)), (x,))


def test_a_model_whose_first_call_is_profile_after_another_ran_the_same_cond(tmp_path):
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    first = Yes().eval()
    with torch.no_grad():
        first(x.abs()), first(-x.abs())
    second = Other().eval()
    outputs = []

    def run(t):
        out = second(t)
        outputs.append(out.detach().clone())
        return out

    profiler = ModuleFunctionKernelProfiler()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        df, _ = profiler.profile(run, [((x.abs(),), {}), ((-x.abs(),), {})], module=second, warmup_iterations=0,
                                 out=tmp_path / "run")  # fmt: skip
    assert profiler.run.manifest["compiled_code"] == "compiled_unpatched"
    with torch.no_grad():
        assert torch.equal(outputs[-2], second(x.abs())) and torch.equal(outputs[-1], second(-x.abs()))
    assert len(df) > 0


def test_the_models_own_error_in_compiled_code_is_not_taken_for_the_stances():
    """An error raised by the model's code (not by a compiled entry's bytecode) is not the stance's."""

    @torch.compile(backend="eager")
    def lookup(table, x):
        return x + table["missing"]

    with pytest.raises(KeyError) as raised:
        lookup({"present": 1}, torch.ones(2))
    assert not ran_another_objects_entry(raised.value, compiled_entries())
    assert not ran_another_objects_entry(KeyError("no traceback"), compiled_entries())
