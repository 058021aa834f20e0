"""Models run in unusual surroundings, each of which profile() got wrong: inside a torch.profiler session of the
user's own (the recording's profiler ended the user's, which then held no events, and nothing said why)."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.analyzer.errors import RecordingBusyError  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


class CountsCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return F.relu(x)


def test_profile_inside_a_users_torch_profiler_is_refused_and_leaves_the_users_session_running():
    model, x = CountsCalls(), torch.randn(4, 4)
    with torch.profiler.profile() as users:
        with pytest.raises(RecordingBusyError, match="torch.profiler session"):
            ModuleFunctionKernelProfiler().profile(model, [((x,), {})], warmup_iterations=1)
        torch.mm(x, x)
    assert model.calls == 0, "refused before the model ran"
    assert "aten::mm" in {event.name for event in users.events()}, "the user's session still records"
    assert not hasattr(F.relu, "__wrapped__")
