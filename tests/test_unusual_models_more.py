"""Models run in unusual surroundings, each of which profile() got wrong: inside a torch.profiler session of the
user's own (the recording's profiler ended the user's, which then held no events, and nothing said why), and a
model that runs a torch.profiler session of its own in its forward (it ended the recording's, whose export then
crashed the process with a segmentation fault), and a model nested about as deep as Python's recursion limit lets it
run (the scopes' wrappers add a frame per level, which passed the limit), and a model that rebinds a patched function
(a library patching F.gelu at its first forward) or its own forward while recorded (the recording put back what was
there before, undoing the model's own change), and a model that calls functionals inside torch.func transforms
(their inputs, vmap's and grad's wrapped tensors, could not be saved once the transform had returned: profile()
crashed writing samples.pt), and a torch.export'ed program (one flat GraphModule: every kernel had its root module
alone), and a model that logs its calls in a TorchFunctionMode (the mode was handed the recorder's own reads of the
calls' arguments: shape, stride, numel, untyped_storage)."""

import re
import sys

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from conftest import assert_patches_undone, snapshot_patch_targets  # noqa: E402
from kernelscope.analyzer.errors import KernelscopeError, RecordingBusyError  # noqa: E402
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


class ProfilesItself(CountsCalls):
    def forward(self, x):
        self.calls += 1
        with torch.profiler.profile():
            return F.relu(x)


def test_a_model_that_runs_a_torch_profiler_of_its_own_gets_a_clear_error_and_leaves_nothing_behind(tmp_path):
    model = ProfilesItself()
    with pytest.raises(KernelscopeError, match="torch.profiler session of its own"):
        ModuleFunctionKernelProfiler().profile(
            model, [((torch.randn(4, 4),), {})], warmup_iterations=1, out=tmp_path / "run"
        )
    assert model.calls == 2, "the patched warm-up and the recorded pass"
    assert not (tmp_path / "run").exists()
    assert not hasattr(F.relu, "__wrapped__") and "forward" not in vars(model)
    assert not torch._C._autograd._profiler_enabled()


class Nested(nn.Module):
    def __init__(self, levels):
        super().__init__()
        self.inner = Nested(levels - 1) if levels else nn.Tanh()

    def forward(self, x):
        return self.inner(x)


def _deepest_that_runs(x, step=10):
    """The deepest Nested that runs unprofiled under the recursion limit, to ``step`` levels, less one step (the
    frames profile() itself takes)."""
    levels = step
    while True:
        try:
            with torch.no_grad():
                Nested(levels + step)(x)
        except RecursionError:
            return levels - step
        levels += step


def test_a_model_nested_about_as_deep_as_the_recursion_limit_allows_is_recorded():
    x, limit = torch.randn(2), sys.getrecursionlimit()
    model = Nested(_deepest_that_runs(x))
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((x,), {})], warmup_iterations=1)
    assert list(frame["function_name"].unique()) == ["torch.tanh"]
    assert sys.getrecursionlimit() == limit, "the limit is put back"


class PatchesGeluOnce(nn.Module):
    """Rebinds F.gelu to a function of its own at its first forward, as libraries that patch torch lazily do, and
    its own forward at its second."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 1:
            previous = F.gelu

            def tanh_gelu(x, approximate="none"):
                return previous(x, approximate="tanh")

            F.gelu = tanh_gelu
        if self.calls == 2:
            self.forward = self.forward_after_two
        return F.gelu(x)

    def forward_after_two(self, x):
        return F.relu(x)


def test_a_function_or_forward_the_model_rebinds_while_recorded_keeps_the_models_binding(monkeypatch):
    monkeypatch.setattr(F, "gelu", F.gelu)  # put back after the test, whatever the model left
    original, model = F.gelu, PatchesGeluOnce()
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 4),), {})], warmup_iterations=1)
    assert F.gelu.__name__ == "tanh_gelu", "the model's own binding stays"
    assert vars(model)["forward"] == model.forward_after_two
    x = torch.randn(4, 4)
    assert torch.equal(F.gelu(x), original(x, approximate="tanh")), "and calls the original, unscoped"
    assert not hasattr(F.relu, "__wrapped__") and not hasattr(F.linear, "__wrapped__")


class Transforms(nn.Module):
    """Calls inside vmap (a module's forward per row) and grad, and one outside any transform."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(8, 8), nn.GELU())

    def forward(self, x):
        rows = torch.vmap(self.inner)(x)
        slope = torch.func.grad(lambda t: F.softplus(t).sum())(x)
        return rows + slope


def test_calls_inside_torch_func_transforms_are_described_and_the_run_is_written(tmp_path):
    from kernelscope.analyzer import load_run
    from kernelscope.analyzer.samples import TensorMeta

    x = torch.randn(4, 8)
    with pytest.warns(RuntimeWarning, match="inside torch.func transforms") as caught:
        frame, data = ModuleFunctionKernelProfiler().profile(Transforms(), [((x,), {})], out=tmp_path / "run")
    (message,) = [str(w.message) for w in caught if "torch.func" in str(w.message)]
    assert re.search(r"the inputs of [2-9]\d* distinct signatures called inside torch.func transforms", message)
    (linear_args, _), softplus_args = data["linear"][0][1], data["softplus"][0][1][0]
    assert isinstance(linear_args[0], TensorMeta) and linear_args[0].shape == (8,), "vmap's rows: the logical shape"
    assert isinstance(softplus_args[0], TensorMeta) and softplus_args[0].shape == (4, 8)
    (added, _) = data["Tensor.__add__"][0][1]
    assert all(isinstance(a, torch.Tensor) for a in added), "a call outside any transform keeps its tensors"
    assert {"linear", "gelu", "softplus"} <= set(frame["function_name"])
    with load_run(tmp_path / "run") as run:
        assert len(run.profiling_df()) == len(frame)
        saved = run.function_data(tensors=True)
    (saved_linear, _), (saved_added, _) = saved["linear"][0][1], saved["Tensor.__add__"][0][1]
    assert isinstance(saved_linear[0], TensorMeta), "left out of samples.pt: read back as its description"
    assert all(isinstance(a, torch.Tensor) for a in saved_added) and torch.equal(saved_added[0], added[0])


class OneTransformedCall(nn.Module):
    def forward(self, x):
        return torch.vmap(F.gelu)(x)


def test_one_transformed_signature_is_said_in_the_singular(tmp_path):
    with pytest.warns(RuntimeWarning, match="inside torch.func transforms") as caught:
        ModuleFunctionKernelProfiler().profile(OneTransformedCall(), [((torch.randn(4, 8),), {})], out=None)
    (message,) = [str(w.message) for w in caught if "torch.func" in str(w.message)]
    assert "the inputs of 1 distinct signature called inside torch.func transforms" in message


class MaskedSum(nn.Module):
    def forward(self, x):
        return (x * 2).sum(), torch.ones(3) * 2  # the second call's input, a plain tensor, samples.pt keeps


def test_inputs_torch_save_cannot_write_plainly_are_left_out_of_samples_pt_with_a_warning(tmp_path):
    """A MaskedTensor (a wrapper subclass with no storage of its own) cannot be made a plain tensor for samples.pt:
    profile() crashed writing it; it is left out there (read back as its description) and kept live in
    function_data."""
    from kernelscope.analyzer import load_run
    from kernelscope.analyzer.samples import TensorMeta
    from torch.masked import masked_tensor

    x = masked_tensor(torch.randn(4, 4), torch.rand(4, 4) > 0.5)
    with pytest.warns(RuntimeWarning, match="samples.pt leaves them out"):
        _, data = ModuleFunctionKernelProfiler().profile(MaskedSum(), [((x,), {})], out=tmp_path / "run")
    assert type(data["Tensor.__mul__"][0][1][0][0]).__name__ == "MaskedTensor", "live in function_data"
    with load_run(tmp_path / "run") as run:
        saved = run.function_data(tensors=True)
    assert isinstance(saved["Tensor.__mul__"][0][1][0][0], TensorMeta)
    assert any(isinstance(args[0], torch.Tensor) for entries in saved.values() for _, (args, _) in entries if args)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj, self.norm = nn.Linear(8, 8), nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(F.gelu(self.proj(x)))


def test_an_exported_program_names_the_modules_its_nodes_ran_in():
    eager = nn.Sequential(Block(), Block()).eval()
    x = torch.randn(2, 8)
    program = torch.export.export(eager, (x,)).module()
    expected = program(x)
    frame, _ = ModuleFunctionKernelProfiler().profile(program, [((x,), {})], warmup_iterations=1)
    eager_frame, _ = ModuleFunctionKernelProfiler().profile(eager, [((x,), {})], warmup_iterations=1)
    modules = {"0.proj", "0.norm", "1.proj", "1.norm", "0", "1"}
    assert set(frame["module_name"]) == set(eager_frame["module_name"]) == modules
    by_op = frame.groupby("op")["module_name"].agg(set).to_dict()
    assert by_op["aten::addmm"] == {"0.proj", "1.proj"} and by_op["aten::native_layer_norm"] == {"0.norm", "1.norm"}
    assert by_op["aten::gelu"] == {"0", "1"}, "the functional between the two, in its block"
    assert "forward" not in vars(program), "the program's own forward is back"
    assert torch.equal(program(x), expected)


class PassesThrough(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class InAMode(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        with PassesThrough():
            return F.relu(self.fc(x) + x) * 2


def test_an_operator_call_under_a_torch_function_mode_is_one_call_not_two():
    # the mode calls Tensor.add for x + y (looked up on torch, so the patched one): that is the same call's work
    profiling_df, function_data = ModuleFunctionKernelProfiler(calls="all").profile(
        InAMode().eval(), [((torch.randn(2, 4),), {})], warmup_iterations=3
    )
    assert {"Tensor.__add__", "Tensor.__mul__"} <= set(function_data)
    assert not {"Tensor.add", "Tensor.mul"} & set(function_data), sorted(function_data)
    named = set(profiling_df["function_name"])
    assert {"Tensor.__add__", "Tensor.__mul__", "linear", "relu"} <= named
    assert not {"Tensor.add", "Tensor.mul"} & named


class Subclass(torch.Tensor):
    pass  # torch.Tensor's own __torch_function__ calls the public function back, as a subclass's handler does


class HandledFunctionals(nn.Module):
    def __init__(self, mode: bool):
        super().__init__()
        self.mode = mode

    def forward(self, x):
        if self.mode:
            with PassesThrough():
                return F.layer_norm(F.gelu(x), (4,))
        return F.layer_norm(F.gelu(x.as_subclass(Subclass)), (4,)).as_subclass(torch.Tensor)


@pytest.mark.parametrize("mode", [True, False], ids=["mode", "subclass"])
def test_a_functional_that_a_torch_function_handler_calls_back_is_one_call(mode):
    # the handler calls the public function, F.layer_norm patched, back: that is the same call's work
    _, function_data = ModuleFunctionKernelProfiler().profile(
        HandledFunctionals(mode).eval(), [((torch.randn(2, 4),), {})], warmup_iterations=3
    )
    assert len(function_data["gelu"]) == 1
    assert len(function_data["layer_norm"]) == 1, function_data["layer_norm"]  # one input sample, as called


class Redirects(torch.overrides.TorchFunctionMode):
    """Routes the functions it recognizes by identity elsewhere, as modes that swap in an implementation do."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        routed = {F.gelu: F.silu, F.softplus: F.relu, torch.sigmoid: F.relu}.get(func)
        return func(*args, **(kwargs or {})) if routed is None else routed(args[0])


class HandlersByIdentity(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 12)

    def forward(self, x):
        from torch.nn.attention.bias import causal_lower_right

        with Redirects():
            y = torch.sigmoid(F.softplus(F.gelu(self.fc(x))))
        q, k, v = y.view(1, 3, 2, 2, 2).unbind(1)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(2, 2))  # torch's CausalBias
        with torch.device("meta"):  # its handler finds the constructors in a set of the originals it cached
            on_meta = torch.zeros(2).is_meta
        return attended.flatten() * on_meta


def test_torch_function_handlers_that_recognize_functions_by_identity_run_as_unrecorded():
    torch.manual_seed(0)
    model, x = HandlersByIdentity().eval(), torch.randn(2, 4)
    with torch.no_grad():
        expected = model(x)
    before, outputs = snapshot_patch_targets(model), []
    frame, data = ModuleFunctionKernelProfiler().profile(
        lambda x: outputs.append(model(x)) or outputs[-1], [((x,), {})], module=model, warmup_iterations=1
    )
    assert torch.equal(outputs[-1], expected), "each handler recognized its function, as unrecorded"
    assert [count for count, _ in data["relu"]] == [2] and "silu" in data, "the routed calls have scopes of their own"
    assert [count for count, _ in data["scaled_dot_product_attention"]] == [1]
    assert not frame["function_name"].isna().any()
    assert_patches_undone(model, before)


def _library_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """A library's attention, bound as F.scaled_dot_product_attention before the recording (as SageAttention's
    documented use does): its calls were named after the torch calls inside it, not after the functional."""
    return torch.softmax(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5, dim=-1) @ v


class Attends(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        q = self.proj(x).view(1, 1, 4, 16)
        return F.scaled_dot_product_attention(q, q, q)


def test_a_functional_a_library_replaced_before_the_recording_is_scoped_by_its_name(monkeypatch):
    monkeypatch.setattr(F, "scaled_dot_product_attention", _library_attention)
    frame, data = ModuleFunctionKernelProfiler().profile(Attends(), [((torch.randn(4, 16),), {})], warmup_iterations=1)
    named = set(frame["function_name"].dropna())
    assert "scaled_dot_product_attention" in named and not named & {"torch.softmax", "Tensor.__matmul__"}, named
    assert [calls for calls, _ in data["scaled_dot_product_attention"]] == [1]
    assert F.scaled_dot_product_attention is _library_attention


class Logs(torch.overrides.TorchFunctionMode):
    """Logs every call it is handed, as a tracing mode does."""

    def __init__(self):
        super().__init__()
        self.log = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.log.append(getattr(func, "__name__", repr(func)))
        return func(*args, **(kwargs or {}))


class LogsItsCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.logs = nn.Linear(4, 4), []

    def forward(self, x):
        with Logs() as mode:
            y = F.layer_norm(F.gelu(self.fc(x)), (4,)) + torch.tanh(x)
        self.logs.append(mode.log)
        return y


@pytest.mark.parametrize("calls", ["all", "functional"])
@pytest.mark.parametrize("warmup", [0, 1])
def test_a_torch_function_mode_is_handed_the_models_calls_alone(calls, warmup):
    model, x = LogsItsCalls().eval(), torch.randn(2, 4)
    with torch.no_grad():
        model(x)
    ModuleFunctionKernelProfiler(calls=calls).profile(model, [((x,), {})], warmup_iterations=warmup)
    assert len(model.logs) == 2 + warmup
    assert all(log == model.logs[0] for log in model.logs), "the mode saw the model's calls, as unrecorded"
