"""Calls beyond the torch.nn.functional namespace (calls="all"), on the CPU."""

import threading

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.calls import torch_call_targets  # noqa: E402
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


def test_naming_rule_cannot_collide_with_functional_names():
    names = {name for _owner, _attribute, name in torch_call_targets()}
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
