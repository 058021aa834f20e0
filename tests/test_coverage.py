"""Calls beyond the torch.nn.functional namespace (calls="all"), and calls named after operators, on the CPU."""

import collections
import functools
import threading

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.calls import AUTOGRAD_APPLY, TRITON_LAUNCH, torch_call_targets  # noqa: E402
from reference import assert_matches_reference  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.functional import gelu as imported_gelu  # noqa: E402


class Coverage(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 16))
        self.bias = nn.Parameter(torch.randn(16))
        self.act = F.relu  # stored at construction: the namespace patch cannot see it

    def forward(self, x):
        h = torch.addmm(self.bias, x, self.weight)  # GPT-2's Conv1D does this
        h = self.act(h) + x  # a stored functional, then a residual operator
        return imported_gelu(torch.cat([h, h], dim=1))


def _profile(model, calls="all", function_names=None):
    profiler = ModuleFunctionKernelProfiler(function_names, calls=calls)
    frame, data = profiler.profile(model, [((torch.randn(4, 16),), {})], warmup_iterations=1)
    return profiler, frame, data


def _named(frame):
    return set(frame["function_name"].dropna())


def test_every_call_is_named_however_it_is_reached():
    _, frame, data = _profile(Coverage())
    assert _named(frame) == {"torch.addmm", "relu", "Tensor.__add__", "torch.cat", "gelu"}
    assert frame["function_name"].notna().all(), "every leaf operator has a named call"
    assert [calls for calls, _ in data["relu"]] == [1]
    (args, _kwargs) = data["torch.addmm"][0][1]
    assert [tuple(a.shape) for a in args] == [(16,), (4, 16), (16, 16)]


def test_functional_mode_sees_only_the_namespace():
    _, frame, data = _profile(Coverage(), calls="functional")
    assert _named(frame) == set() and data == {}, "stored references and torch calls are invisible then"
    _, frame, _ = _profile(nn.Sequential(nn.Linear(16, 16), nn.ReLU()).eval(), calls="functional")
    assert _named(frame) == {"linear", "relu"}


def test_torch_calls_inside_a_functional_belong_to_the_functional():
    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = nn.MultiheadAttention(16, 2)

        def forward(self, x):
            return self.mha(x, x, x, need_weights=True)[0]  # the weights path calls torch.bmm/baddbmm inside F

    _, frame, _ = _profile(Attention())
    named = _named(frame)
    assert "multi_head_attention_forward" in named and "linear" in named
    assert not any(name.startswith(("torch.", "Tensor.")) for name in named)


def test_function_names_selects_torch_level_calls_too():
    _, frame, data = _profile(Coverage(), function_names={"torch.addmm"})
    assert set(data) == {"torch.addmm"}
    assert _named(frame) == {"torch.addmm", "relu", "Tensor.__add__", "torch.cat", "gelu"}
    assert frame.loc[frame["function_name"] == "gelu", "sample_id"].isna().all()


def test_stored_activation_of_transformer_encoder_layer_is_named():
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu").eval()
    _, frame, _ = _profile(layer, function_names=set())
    ff = frame[frame["module_name"] == ""]
    assert "gelu" in set(ff["function_name"]), "activation='gelu' keeps a reference to F.gelu"


# held where the namespace patch cannot see them: a registry, a partial, a list, a default argument
ACTIVATIONS = {"relu": F.relu}
NAMED_NORM = collections.namedtuple("NamedNorm", "norm")(F.layer_norm)


def _helper(x, act=F.hardtanh):  # a function of the model's own module with a functional as a default
    return act(x)


class StoredReferences(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)
        self.act = functools.partial(F.gelu, approximate="tanh")
        self.more = [F.silu]
        self.pair = (F.sigmoid, 2)

    def forward(self, x, norm=F.layer_norm, *, softmax=F.softmax):
        x = ACTIVATIONS["relu"](self.act(self.linear(x)))
        x = self.pair[0](self.more[0](x)) * self.pair[1]
        return softmax(NAMED_NORM.norm(norm(_helper(x), (16,)), (16,)), dim=-1)


def test_functionals_held_in_registries_partials_and_defaults_are_named_and_put_back():
    model = StoredReferences()
    held = (ACTIVATIONS["relu"], model.act, model.act.func, model.more[0], model.pair, NAMED_NORM,
            StoredReferences.forward.__defaults__, StoredReferences.forward.__kwdefaults__["softmax"],
            _helper.__defaults__)
    _, frame, data = _profile(model)
    assert _named(frame) >= {"linear", "gelu", "relu", "silu", "sigmoid", "layer_norm", "softmax", "hardtanh"}
    assert not any(name.startswith(("aten::", "torch.")) for name in _named(frame)), _named(frame)
    assert [calls for calls, _ in data["layer_norm"]] == [2], "the default and the named tuple's"
    assert data["gelu"][0][1][1] == {"approximate": "tanh"}, "the partial's keywords are the call's"
    assert (ACTIVATIONS["relu"], model.act, model.act.func, model.more[0], model.pair, NAMED_NORM,
            StoredReferences.forward.__defaults__, StoredReferences.forward.__kwdefaults__["softmax"],
            _helper.__defaults__) == held
    assert ACTIVATIONS["relu"] is F.relu and model.more[0] is F.silu and _helper.__defaults__[0] is F.hardtanh
    assert type(NAMED_NORM).__name__ == "NamedNorm" and NAMED_NORM.norm is F.layer_norm


def _closing_over(act):
    return lambda x: act(x)


class Settings:
    """A config object of the model's own, holding an activation."""

    def __init__(self):
        self.act = F.gelu


class HiddenReferences(nn.Module):
    ACT = F.softplus  # a class attribute: a builtin, which binds no instance
    NORM = staticmethod(F.layer_norm)

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)
        self.closure = _closing_over(F.silu)
        self.settings = Settings()

    def forward(self, x):
        x = self.settings.act(self.closure(self.ACT(self.linear(x))))
        return self.NORM(x, (16,))


def test_functionals_in_class_attributes_closures_and_config_objects_are_named_and_put_back():
    model = HiddenReferences()
    held = (vars(HiddenReferences)["ACT"], vars(HiddenReferences)["NORM"], model.closure.__closure__[0].cell_contents,
            model.settings.act)  # fmt: skip
    _, frame, data = _profile(model)
    assert _named(frame) >= {"linear", "softplus", "silu", "gelu", "layer_norm"}, _named(frame)
    assert not any(name.startswith(("aten::", "torch.")) for name in _named(frame)), _named(frame)
    assert [calls for calls, _ in data["softplus"]] == [1] and [calls for calls, _ in data["layer_norm"]] == [1]
    now = (vars(HiddenReferences)["ACT"], vars(HiddenReferences)["NORM"], model.closure.__closure__[0].cell_contents,
           model.settings.act)  # fmt: skip
    assert all(a is b for a, b in zip(now, held, strict=True)) and model.closure.__closure__[0].cell_contents is F.silu


def _written_by_exec():
    namespace = {}  # held by nothing but the function's __globals__
    exec(  # noqa: S102 (a forward written by exec, as code generators do, into a namespace of its own)
        "from torch.nn.functional import celu\ndef forward(self, x):\n    return celu(self.linear(x))\n", namespace
    )
    return namespace["forward"]


class Generated(nn.Module):
    forward = _written_by_exec()

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)


def test_functionals_imported_into_the_namespace_of_a_forward_written_by_exec_are_named_and_put_back():
    _, frame, data = _profile(Generated())
    assert _named(frame) >= {"linear", "celu"} and [calls for calls, _ in data["celu"]] == [1], _named(frame)
    assert not any(name.startswith(("aten::", "torch.")) for name in _named(frame)), _named(frame)
    assert Generated.forward.__globals__["celu"] is F.celu


class Activation(nn.Module):
    def forward(self, x):
        return F.silu(x) * 2


class Interpreted(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.graph = nn.Linear(16, 16), torch.fx.symbolic_trace(Activation())  # its node holds F.silu

    def forward(self, x):
        return torch.fx.Interpreter(self.graph).run(self.fc(x))


def test_functionals_a_torch_fx_interpreter_calls_from_its_graph_nodes_are_named_and_put_back():
    model = Interpreted()
    held = [node.target for node in model.graph.graph.nodes if node.op == "call_function"]
    assert any(target is F.silu for target in held)
    _, frame, data = _profile(model)
    assert _named(frame) >= {"linear", "silu"} and [calls for calls, _ in data["silu"]] == [1], _named(frame)
    assert not any(name.startswith(("aten::", "torch.")) for name in _named(frame)), _named(frame)
    now = [node.target for node in model.graph.graph.nodes if node.op == "call_function"]
    assert all(a is b for a, b in zip(now, held, strict=True))


def test_naming_rule_cannot_collide_with_functional_names():
    # the targets named after their kind make dotted names per call: <Function>.apply, triton.<kernel>
    names = {name for _owner, _attribute, name in torch_call_targets()} - {AUTOGRAD_APPLY, TRITON_LAUNCH}
    assert {"torch.addmm", "torch.cat", "Tensor.add", "Tensor.__add__", "Tensor.__getitem__"} <= names
    assert {"torch.linalg.norm", "torch.einsum"} <= names
    assert not {"Tensor.view", "Tensor.size", "Tensor.transpose", "torch.is_grad_enabled"} & names
    functional = {n for n in dir(F) if not n.startswith("_")}
    assert all("." in n for n in names) and not any("." in n for n in functional)


def test_indexing_with_slices_is_one_signature():
    class Slicer(nn.Module):
        def forward(self, x):
            return x[1:3] * 2 + x[1:3]

    _, frame, data = _profile(Slicer())
    assert [calls for calls, _ in data["Tensor.__getitem__"]] == [2]
    assert "Tensor.__mul__" in set(frame["function_name"])


def test_kernels_of_another_thread_are_rows_with_their_thread():
    class TwoThreads(nn.Module):
        def forward(self, x):
            side = torch.zeros(64, 64)

            def work():
                for _ in range(5):
                    side.mul_(2).add_(1)

            thread = threading.Thread(target=work)
            thread.start()
            y = F.relu(x)
            thread.join()
            return y + side.sum()

    _, frame, _ = _profile(TwoThreads())
    main = frame[frame["module_name"].notna()]
    other = frame[frame["module_name"].isna()]
    assert main["thread"].nunique() == 1 and len(other) > 0
    assert set(other["thread"]) - set(main["thread"]), "the side thread's operators are rows of their own thread"
    assert {"aten::mul_", "aten::add_"} <= set(other["call_op"]), "profile_all_threads records its operators"
    assert set(other["function_name"]) == {"Tensor.mul_", "Tensor.add_"}, "threads started in the pass are named"


@torch.library.custom_op("kstest::fused_op", mutates_args=())
def fused_op(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.relu(torch.ops.aten.mm(x, w))  # aten calls: no torch-level call scope inside


@fused_op.register_fake
def _(x, w):
    return x.new_empty(x.shape[0], w.shape[1])


def _nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """torchvision::nms where torchvision is not installed (the same name and schema, a C++-registered operator
    as torchvision's is; greedy NMS from aten calls, which open no call scope, like torchvision's C++ kernel)."""
    aten = torch.ops.aten
    order, keep = aten.argsort(scores, descending=True), []
    while aten.numel(order) > 0:
        first = order[0]
        keep.append(first)
        top_left = aten.maximum(boxes[first, :2], boxes[order[1:], :2])
        bottom_right = aten.minimum(boxes[first, 2:], boxes[order[1:], 2:])
        inter = aten.prod(aten.clamp(aten.sub(bottom_right, top_left), 0), 1)
        area = aten.prod(aten.sub(boxes[:, 2:], boxes[:, :2]), 1)
        iou = aten.div(inter, aten.sub(aten.add(area[first], area[order[1:]]), inter))
        order = order[1:][aten.le(iou, iou_threshold)]
    return aten.stack(keep) if keep else boxes.new_empty(0, dtype=torch.long)


def _torchvision_nms():
    """torchvision.ops.nms; where torchvision is not installed (or PyPI's build beside a CPU torch cannot load its
    operators), the operator ``torchvision::nms`` registered here by the same name and schema."""
    try:
        from torchvision.ops import nms

        return nms
    except (ImportError, RuntimeError):
        pass
    try:
        return torch.ops.torchvision.nms
    except (AttributeError, RuntimeError):
        library = torch.library.Library("torchvision", "FRAGMENT")
        library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        library.impl("nms", _nms, "CPU")
        _torchvision_nms.library = library  # registered while the library object lives
        return torch.ops.torchvision.nms


nms = _torchvision_nms()


class Unscoped(nn.Module):
    """Work that no call scope reaches: a stock fast-path TransformerEncoder (aten::_transformer_encoder_layer_fwd),
    cuDNN-style RNNs (aten::lstm, aten::gru), a torch.library.custom_op, torch.ops.aten called directly, a torch._VF
    call and a torchvision operator."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.lstm = nn.LSTM(16, 16, batch_first=True)
        self.gru = nn.GRU(16, 16, batch_first=True)
        self.weight = nn.Parameter(torch.randn(16, 16))

    def forward(self, x):
        x = self.gru(self.lstm(self.encoder(x))[0])[0]
        y = torch.ops.aten.mm.default(fused_op(x[0], self.weight), self.weight)
        h = torch._VF.rnn_tanh(
            x, x.new_zeros(1, 4, 16), [self.weight] * 2 + [self.weight[0]] * 2, True, 1, 0.0, False, False, True
        )
        boxes = torch.cat([x[0, :, :2].abs(), x[0, :, :2].abs() + 1], dim=1)
        return y.sum() + h[0].sum() + nms(boxes, x[0, :, 0], 0.5).sum()


UNSCOPED_CALLS = {  # module -> the operators its kernels are named after
    "encoder.layers.0": {"aten::_transformer_encoder_layer_fwd"},
    "encoder.layers.1": {"aten::_transformer_encoder_layer_fwd"},
    "lstm": {"aten::lstm"},
    "gru": {"aten::gru"},
}
ROOT_CALLS = {"kstest::fused_op", "aten::mm", "aten::rnn_tanh", "torchvision::nms"}


@pytest.fixture(scope="module")
def unscoped():
    profiler = ModuleFunctionKernelProfiler()
    frame, data = profiler.profile(Unscoped().eval(), [((torch.randn(4, 6, 16),), {})], warmup_iterations=1)
    return frame, profiler.describe_results(frame, data, top_k=100).set_index("function_name")


def test_work_no_call_scope_holds_is_named_after_its_operator(unscoped):
    frame, _ = unscoped
    named = frame.loc[frame["function_name"].notna(), "kernel_us"].sum()
    assert named >= 0.999 * frame["kernel_us"].sum() and frame["function_name"].notna().all()
    for module, calls in UNSCOPED_CALLS.items():  # beside them, torch-level calls: nn.LSTM's torch.zeros
        names = set(frame.loc[frame["module_name"] == module, "function_name"])
        assert {name for name in names if "::" in name} == calls and not names & ROOT_CALLS, module
    assert ROOT_CALLS <= set(frame.loc[frame["module_name"] == "", "function_name"])
    assert frame.loc[frame["function_name"].isin(ROOT_CALLS | {"aten::lstm"}), "sample_id"].isna().all()


def test_the_summary_counts_the_operator_events_a_call_is_named_after(unscoped):
    _, summary = unscoped
    calls = summary["calls"].to_dict()
    assert calls["aten::_transformer_encoder_layer_fwd"] == 2, "one per encoder layer, however many rows each has"
    assert [calls[name] for name in ("aten::lstm", "aten::gru", "kstest::fused_op", "torchvision::nms")] == [1] * 4
    assert summary.loc["aten::_transformer_encoder_layer_fwd", "num_modules"] == 2
    operators = summary[summary.index.str.contains("::")]
    assert operators["num_distinct_samples"].isna().all() and operators["tensor_size_MB"].isna().all()


def test_functional_mode_names_no_call_from_operators():
    profiler = ModuleFunctionKernelProfiler(calls="functional")
    frame, data = profiler.profile(Unscoped().eval(), [((torch.randn(4, 6, 16),), {})], warmup_iterations=1)
    assert data == {} and frame["function_name"].isna().all(), "aitune's view: only torch.nn.functional calls"


def test_a_plain_cpu_trace_names_every_operator_s_call(tmp_path):
    model = Unscoped().eval()
    with torch.no_grad():
        model(torch.randn(4, 6, 16))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            model(torch.randn(4, 6, 16))
    prof.export_chrome_trace(str(tmp_path / "plain.json"))
    with load_run(tmp_path / "plain.json") as run:
        frame = run.profiling_df()
        assert_matches_reference(run, tmp_path / "plain.json")
    named = set(frame["function_name"])
    assert {"aten::_transformer_encoder_layer_fwd", "aten::lstm", "aten::gru"} | ROOT_CALLS <= named
    assert frame["function_name"].notna().all() and frame["module_name"].isna().all()
