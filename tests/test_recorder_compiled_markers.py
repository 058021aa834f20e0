"""dynamo's ``TorchDynamo Cache Lookup`` operator, which the profiler records around a ``torch.compile``d function's
guards before its ``Torch-Compiled Region``, is that call's work: on the CPU its row is named ``torch.compile``, as
the compiled region's own markers are (docs/sql.md, "Calls named from the trace"), not ``(other operator)``."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from reference import assert_matches_reference  # noqa: E402
from torch import nn  # noqa: E402


@torch.compile(backend="eager")
def _scaled_gelu(x):
    return F.gelu(x) * 2


class CallsACompiledFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return _scaled_gelu(self.fc(x))


def test_the_cache_lookup_of_a_compiled_function_is_named_torch_compile(tmp_path):
    model, samples = CallsACompiledFunction().eval(), [((torch.randn(4, 8),), {})]
    frame, _ = ModuleFunctionKernelProfiler().profile(model, samples, out=tmp_path / "run")
    lookups = frame[frame["op"] == "TorchDynamo Cache Lookup"]
    assert len(lookups) == 1 and set(lookups["function_name"]) == {"torch.compile"}
    assert "(other operator)" not in set(frame["function_name"])
    with load_run(tmp_path / "run") as run:
        assert_matches_reference(run, tmp_path / "run" / "trace.json.gz")
