"""A model that pickles, saves or copies itself while recorded, holding patched functions by reference where no
recording patches the reference (``calls="functional"`` patches only the namespace; a set, a nested list or an
object's attribute is no stored reference either): pickle writes a function as its name and checks that the name
holds it, which while recorded holds the function's wrapper (recorder/copies.py)."""

import copy
import functools
import io
import pickle

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402

PICKLES: list[bytes] = []  # what HoldsFunctions wrote in its forward
COPIES: list[nn.Module] = []


class HoldsFunctions(nn.Module):
    """Holds functionals (Python functions of torch.nn.functional and torch's builtins) directly, in containers
    nested two deep, and in a partial; pickles, saves and deep-copies itself in its forward."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act, self.conv = F.relu, F.conv1d
        self.nested = {"acts": [F.silu, (F.hardtanh,)]}
        self.tanh_gelu = functools.partial(F.gelu, approximate="tanh")

    def forward(self, x):
        PICKLES.append(pickle.dumps(self))
        buffer = io.BytesIO()
        torch.save(self, buffer)
        PICKLES.append(buffer.getvalue())
        COPIES.extend((copy.deepcopy(self), copy.copy(self)))
        silu, (hardtanh,) = self.nested["acts"]
        return hardtanh(silu(self.tanh_gelu(self.act(self.fc(x)))))


def _holds_the_originals(module: HoldsFunctions, unwrapped=lambda function: function) -> bool:
    silu, (hardtanh,) = module.nested["acts"]
    act, conv, silu, hardtanh, gelu = map(unwrapped, (module.act, module.conv, silu, hardtanh, module.tanh_gelu.func))
    return (
        act is F.relu and conv is F.conv1d and silu is F.silu and hardtanh is F.hardtanh and gelu is F.gelu
        and module.tanh_gelu.keywords == {"approximate": "tanh"}
    )  # fmt: skip


def _wrapped(function):
    """The function a recorder's wrapper calls (a copy made while recorded holds what the model holds)."""
    return getattr(function, "__wrapped__", function)


@pytest.mark.parametrize("calls", ["functional", "all"])
def test_a_module_holding_functions_pickles_and_copies_itself_while_recorded_as_the_originals(calls):
    model, x = HoldsFunctions().eval(), torch.randn(2, 4)
    expected = model(x)
    PICKLES.clear(), COPIES.clear()
    frame, _ = ModuleFunctionKernelProfiler(calls=calls).profile(model, [((x,), {})], warmup_iterations=1)
    assert len(PICKLES) == 4 and len(frame)
    for saved in list(PICKLES):  # written while recorded, loaded after (running one pickles it again: a copy)
        loaded = pickle.loads(saved) if saved[:1] == b"\x80" else torch.load(io.BytesIO(saved), weights_only=False)
        assert _holds_the_originals(loaded) and torch.equal(loaded(x), expected)
    for copied in list(COPIES):  # a copy holds what the model held: the functions, or (calls="all") their wrappers
        if calls == "all":  # whose names no longer hold them once recorded: such a copy cannot pickle itself then
            assert _holds_the_originals(copied, _wrapped)
        else:
            assert _holds_the_originals(copied) and torch.equal(copied(x), expected)
    assert _holds_the_originals(model) and "__reduce_ex__" not in vars(nn.Module)
