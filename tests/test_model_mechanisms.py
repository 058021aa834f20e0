"""Models built on torch mechanisms that profile() got wrong: a model that works out its output's shape under a
FakeTensorMode (its functional calls took FakeTensors, which torch.save cannot write: profile() crashed writing
samples.pt), and a model that makes an object of identity equality in every pass (a torch.Generator, a cache
of its own handed to a compiled block, as transformers' DynamicCache: each pass's was a signature of its own, so the
warm-up's prediction of the recorded pass was wrong and the model ran one pass more), and a GraphModule of
``torch.fx.symbolic_trace`` whose nodes record the modules they ran in (it ran
as an exported program, node by node: the nodes of the root module were scoped in the module of the node before
them, and its functions, called as the nodes hold them, had no call names; and its warm-ups ran its code, which
calls ``torch._C._nn.gelu`` unpatched, so the recorded pass's calls were not those predicted and it ran a pass more),
and a model whose helpers, in another
module of its own code, import functionals by name (their rows were named after their operators, or after the
torch-level call inside them), and a model that copies or saves a submodule in its forward (the copy ran the
original module through the wrapper copied with it, and saving it could not pickle the wrapper), and one that
copies or saves itself with modules whose classes define their own ``__getstate__`` (nn.GRU's, a user's) and with
functionals it holds by reference (the GRU's copy ran the original GRU; no functional's wrapper could be pickled),
and a model that registers a submodule at its first forward (the hierarchy was read before the warm-ups: the
submodule had no scope, its rows were its parent's)."""

import copy
import io
import pickle
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.analyzer.samples import TensorMeta  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from mechanism_ops import activation, normalized  # noqa: E402
from torch import nn  # noqa: E402


class ShapeFirst(nn.Module):
    """Works out the shape of its output with fake tensors, then allocates it and computes it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            shape = F.linear(mode.from_tensor(x), self.fc.weight).shape
        return torch.zeros(shape) + self.fc(x)


def test_calls_made_with_fake_tensors_are_left_out_of_samples_pt(tmp_path):
    model, x = ShapeFirst().eval(), torch.randn(2, 8)
    expected = model(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, data = ModuleFunctionKernelProfiler().profile(model, [((x,), {})], out=tmp_path / "run")
    messages = [str(warning.message) for warning in caught]
    assert any("FakeTensor): samples.pt leaves them out" in message for message in messages)
    assert not any("data pointer" in message for message in messages), "the recorder reads no fake data pointer"
    assert torch.equal(model(x), expected)
    live = [args[0] for _, (args, _) in data["linear"]]
    assert {type(tensor).__name__ for tensor in live} == {"FakeTensor", "Tensor"}
    with load_run(tmp_path / "run") as run:
        saved = [args[0] for _, (args, _) in run.function_data(tensors=True)["linear"]]
    kinds = [isinstance(tensor, TensorMeta) for tensor in saved]
    assert kinds == [type(tensor).__name__ == "FakeTensor" for tensor in live], "only the fake call is left out"
    assert torch.equal(saved[kinds.index(False)], live[kinds.index(False)])


class Cache:
    """A cache made afresh by every forward, as transformers' DynamicCache."""


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, cache):
        return self.fc(x)


class FreshObjects(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.compile(Block(), backend="eager")

    def forward(self, x):
        noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(0))
        return self.block(x + noise, cache=Cache())


def test_objects_made_afresh_in_every_pass_are_one_signature():
    model, x = FreshObjects().eval(), torch.randn(2, 8)
    expected = model(x)
    profiler = ModuleFunctionKernelProfiler()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        _, data = profiler.profile(model, [((x,), {})])
    assert profiler.run.manifest["sample_keys"] == "predicted"
    assert [calls for calls, _ in data["torch.randn"]] == [1] and [calls for calls, _ in data["torch.compile"]] == [1]
    assert torch.equal(model(x), expected)


class TracedBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj, self.norm = nn.Linear(8, 8), nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(F.gelu(self.proj(x))) + x


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks, self.head = nn.Sequential(TracedBlock(), TracedBlock()), nn.Linear(8, 8)

    def forward(self, x):
        return self.head(F.relu(self.blocks(x)))


def _module_calls(model, x) -> dict:
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((x,), {})], warmup_iterations=1)
    return frame.groupby(["module_name", "function_name"])["op"].agg(sorted).to_dict()


class Leaves(nn.Module):
    """Its trace calls its two Linears as modules (leaves, whose nodes alone have stacks) and F.relu between them."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


@pytest.mark.parametrize("eager", [Tower, Leaves])
def test_a_symbolic_trace_has_the_modules_and_calls_of_the_eager_model(eager):
    eager, x = eager().eval(), torch.randn(2, 8)
    traced = torch.fx.symbolic_trace(eager)
    assert _module_calls(traced, x) == _module_calls(eager, x)
    assert torch.equal(traced(x), eager(x)) and "forward" not in vars(traced)


def test_a_symbolic_trace_is_keyed_as_its_warm_up_predicted():
    """Its code calls ``torch._C._nn.gelu`` where its node holds ``F.gelu``: the warm-ups ran that code (the call
    unpatched, no sample) and the recorded pass the graph node by node (the call ``gelu``), so the prediction failed
    and the model ran a pass more, with a warning."""
    traced, x = torch.fx.symbolic_trace(Tower().eval()), torch.randn(2, 8)
    assert "torch._C._nn.gelu" in traced.code
    profiler = ModuleFunctionKernelProfiler()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        _, data = profiler.profile(traced, [((x,), {})])
    assert profiler.run.manifest["sample_keys"] == "predicted"
    assert [calls for calls, _ in data["gelu"]] == [2] and [calls for calls, _ in data["linear"]] == [3]


class UsesHelpers(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return normalized(activation(self.fc(x)))


def test_functionals_a_helper_module_imports_by_name_are_named():
    import mechanism_ops

    model, x = UsesHelpers().eval(), torch.randn(2, 8)
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((x,), {})], warmup_iterations=1)
    calls = frame.loc[frame["op"] == frame["call_op"], "function_name"]
    assert set(calls) == {"linear", "gelu", "layer_norm"}
    assert mechanism_ops.gelu is F.gelu and mechanism_ops.layer_norm is F.layer_norm, "put back"


class CopiesItsLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        torch.save(self.fc, io.BytesIO())
        doubled = copy.deepcopy(self.fc)
        doubled.weight.data.mul_(2)
        return doubled(x) - self.fc(x)


class KeepsOutputs(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner, self.outputs = inner, []

    def forward(self, x):
        self.outputs.append(self.inner(x))
        return self.outputs[-1]


def test_a_submodule_copied_or_saved_in_the_forward_runs_as_the_copy():
    model, x = KeepsOutputs(CopiesItsLayer().eval()), torch.randn(2, 8)
    expected = model(x)
    ModuleFunctionKernelProfiler().profile(model, [((x,), {})], warmup_iterations=1)
    assert all(torch.equal(output, expected) for output in model.outputs[1:]), "every pass as plain torch's"
    assert "__reduce_ex__" not in vars(nn.Module) and vars(nn.Module)["__getstate__"].__module__ == nn.Module.__module__


class OwnState(nn.Module):
    """Defines its own ``__getstate__``, which gives its ``__dict__`` itself, as a user's module may."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def __getstate__(self):
        return self.__dict__


class SavesItself(nn.Module):
    """Saves itself and runs a copy of itself with doubled weights in its forward, holding functionals by reference."""

    def __init__(self):
        super().__init__()
        self.fc, self.rnn, self.own = nn.Linear(8, 8), nn.GRU(8, 8, batch_first=True), OwnState()
        self.act, self.acts, self.table = F.relu, [F.gelu], {"silu": F.silu}
        self.saved = []

    def activations(self, x):
        return self.table["silu"](self.acts[0](self.act(x)))

    def forward(self, x):
        if not self.saved:
            self.saved.append(pickle.dumps(self))
            torch.save(self, io.BytesIO())
        doubled = copy.deepcopy(self)
        for parameter in doubled.parameters():
            parameter.data.mul_(2)
        return self.activations(self.fc(x)) + doubled.own.fc(x) + doubled.rnn(x[None])[0][0] + doubled.activations(x)


def test_a_module_holding_functionals_copies_and_pickles_itself_as_it_is():
    model, x = SavesItself().eval(), torch.randn(2, 8)
    expected, model.saved = model(x), []
    outputs = KeepsOutputs(model)
    frame, _ = ModuleFunctionKernelProfiler().profile(outputs, [((x,), {})], warmup_iterations=1)
    assert all(torch.equal(output, expected) for output in outputs.outputs), "every pass as plain torch's"
    assert {"relu", "gelu", "silu"} <= set(frame.loc[frame["module_name"] == "inner", "function_name"])
    loaded = pickle.loads(model.saved[0])  # pickled while recorded, loaded after: the model as it is
    assert (loaded.act, loaded.acts, loaded.table) == (F.relu, [F.gelu], {"silu": F.silu})
    assert not any("forward" in vars(module) for module in loaded.modules()) and torch.equal(loaded(x), expected)
    assert "__reduce_ex__" not in vars(nn.Module) and type(model.own).__getstate__ is OwnState.__getstate__


class SizedAtFirstCall(nn.Module):
    """Registers its projection at its first forward, sized from the input."""

    def __init__(self):
        super().__init__()
        self.proj = None

    def forward(self, x):
        if self.proj is None:
            self.proj = nn.Sequential(nn.Linear(x.shape[-1], 8), nn.GELU())
        return F.relu(self.proj(x))


def test_a_submodule_registered_at_the_first_forward_has_its_own_rows():
    model = SizedAtFirstCall()
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 6),), {})], warmup_iterations=3)
    by_call = dict(zip(frame["function_name"], frame["module_name"], strict=False))
    assert by_call["linear"] == "proj.0" and by_call["gelu"] == "proj.1" and by_call["relu"] == ""
    assert all(frame.loc[frame["module_name"] == "proj.0", "module"].map(lambda m: m is model.proj[0]))
    assert "forward" not in vars(model.proj[0])
