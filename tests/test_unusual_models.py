"""Models and inputs outside the usual shape, each of which made profile() raise: a tensor subclass with its own
``__torch_function__`` as input (its conversion passes the subclass itself to ``Tensor.as_subclass``, which the
sample's size counted as a tensor), a lazy module (nn.LazyLinear: parameters without a shape until its first
forward, which the recorder keyed up front), and modules and calls named with characters that Kineto's trace export
mangles (a double quote made the trace unreadable; a line break, a tab or a letter beyond ASCII lost or changed the
name)."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


class Traced(torch.Tensor):
    """A tensor subclass that sees every torch call on it, as tensor-subclass libraries do."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return F.gelu(self.fc(x))


def test_a_tensor_subclass_input_is_recorded(tmp_path):
    x = torch.randn(4, 16).as_subclass(Traced)
    profiler = ModuleFunctionKernelProfiler()
    frame, data = profiler.profile(Block(), [((x,), {})], warmup_iterations=1, out=tmp_path / "run")
    assert {"linear", "gelu"} <= set(frame["function_name"]) and frame["function_name"].notna().all()
    assert [calls for calls, _ in data["linear"]] == [1]
    with load_run(tmp_path / "run") as run:
        assert run.describe(top_k=None).set_index("function_name").loc["linear", "calls"] == 1


def test_a_lazy_module_is_recorded_from_its_first_forward():
    model = nn.Sequential(nn.LazyLinear(8), nn.ReLU())
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 16),), {})], warmup_iterations=1)
    assert set(frame["module_name"]) == {"0", "1"} and set(frame["function_name"]) == {"linear", "relu"}
    (args, _kwargs) = data["linear"][0][1]
    assert [tuple(a.shape) for a in args if a is not None] == [(4, 16), (8, 16), (8,)]


class AsksItsSignature(nn.Module):
    """As transformers' generate() does: it asks ``inspect.signature(self.forward)`` whether the model takes an
    attention mask, and runs other code (no mask, other kernels) when it seems not to."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)  # folded into its call: a wrapper of another kind

    def forward(self, x, attention_mask=None):
        return self.norm(self.fc(x if attention_mask is None else x * attention_mask))


def test_a_model_sees_its_own_forward_while_recorded():
    import inspect

    model = AsksItsSignature().eval()
    seen = []

    def generate(x):
        for module in (model, model.fc, model.norm):
            seen.append((inspect.signature(module.forward), module.forward.__name__, module.forward.__doc__))
        return model(x, attention_mask=torch.ones_like(x))

    generate(torch.randn(4, 16))
    unprofiled = list(seen)
    seen.clear()
    frame, _ = ModuleFunctionKernelProfiler().profile(generate, [((torch.randn(4, 16),), {})], module=model)
    assert seen and all(s == u for s, u in zip(seen, unprofiled * (len(seen) // 3), strict=True)), seen[:3]
    assert {"", "fc", "norm"} <= set(frame["module_name"])


def test_a_compiled_forward_is_seen_as_itself_while_recorded():
    import inspect

    model = AsksItsSignature().eval()
    model.forward = torch.compile(model.forward, backend="eager")  # torch.compile keeps the signature
    seen = []

    def generate(x):
        seen.append(str(inspect.signature(model.forward)))
        return model(x)

    generate(torch.randn(4, 16))
    ModuleFunctionKernelProfiler().profile(generate, [((torch.randn(4, 16),), {})], module=model)
    assert set(seen) == {"(x, attention_mask=None)"}, seen


# Module names Kineto's trace export mangles, whose scopes the recorder escapes: a line break (removed), a backslash
# (made a slash), a double quote (written unescaped: the whole trace unreadable), a tab or other control character
# and any non-ASCII character (the event dropped), a NUL (the name cut there); and a "%", the escape itself.
ODD_NAMES = ["a\nb", 'say "hi"', "back\\slash", "tab\tcr\r", "größe", "层", "😀", "50%", "%41", "nul\x00end", "ok"]


class Größe(torch.autograd.Function):
    """A call named in letters beyond ASCII (a class name may be any identifier): ``Größe.apply``."""

    @staticmethod
    def forward(ctx, x):
        return torch.ops.aten.mul(x, 2)  # an operator no other call names: its kernel is the Function's


class Named(nn.Module):
    """Children under odd names, in both forms of module scope: its own (Block) and folded into its call (Linear)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleDict({name: Block() for name in ODD_NAMES})
        for name in ODD_NAMES:
            setattr(self, name, nn.Linear(16, 16))

    def forward(self, x):
        for name, block in self.blocks.items():
            x = getattr(self, name)(block(x))
        return Größe.apply(x)


def test_module_and_call_names_that_kineto_would_mangle_come_back_exactly(tmp_path):
    model = Named().eval()
    profiler = ModuleFunctionKernelProfiler()
    frame, _ = profiler.profile(model, [((torch.randn(2, 16),), {})], warmup_iterations=1, out=tmp_path / "run")
    expected = {f"blocks.{name}.fc" for name in ODD_NAMES} | set(ODD_NAMES)
    assert expected <= set(frame["module_name"].dropna()), sorted(set(frame["module_name"].dropna()) ^ expected)
    with load_run(tmp_path / "run") as run:
        offline = run.profiling_df()
        assert expected <= set(offline["module_name"].dropna())
        linear = offline[offline["function_name"] == "linear"]
        assert set(linear["module_name"]) == expected, "every linear kernel has its module"
        assert "Größe.apply" in set(offline["function_name"]), "a call's name comes back exactly too"


def _doubled(ctx, x):
    return torch.ops.aten.mul(x, 2)


# a Function class made by type() may be named in any letters: "@" ended the call in its scope's name and the rest
# read as a folded module (a Tensor attribute so named made profile() raise: a sample samples.json did not hold)
AT_NAMED = type("Twice@v2#1", (torch.autograd.Function,), {"forward": staticmethod(_doubled)})


class CallsAtNamed(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(8, 8), nn.Tanh())

    def forward(self, x):
        return AT_NAMED.apply(self.inner(x))


def test_a_call_whose_name_holds_the_scope_separators_comes_back_exactly(tmp_path):
    frame, data = ModuleFunctionKernelProfiler().profile(CallsAtNamed().eval(), [((torch.randn(2, 8),), {})],
                                                         warmup_iterations=1, out=tmp_path / "run")  # fmt: skip
    assert [calls for calls, _ in data["Twice@v2#1.apply"]] == [1]
    assert set(frame.loc[frame["function_name"] == "Twice@v2#1.apply", "module_name"]) == {""}
    with load_run(tmp_path / "run") as run:
        assert set(run.profiling_df()["function_name"]) == set(frame["function_name"])
