"""Programs for cpu_sweep.py around torch modules that do more than their one call, and around what libraries do to
torch before profile(): an orthogonal parametrization (matrix exponential per call), an embedding renormalized in
place (``max_norm``), convolutions whose padding mode adds an ``F.pad`` call, an adaptive softmax reached through its
methods rather than its forward, hooks written straight into the hook dicts (before profile() and at the model's first
call), torch functions and Tensor methods a library replaced (``torch.matmul``, ``torch.bmm``,
``torch.linalg.vector_norm``, ``Tensor.log_softmax``; ``F.gelu`` by a ``functools.partial``), functionals held as Enum
members, in a slotted frozen dataclass, in a lambda's default and in a class attribute's registry.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import dataclasses
import enum
import functools

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import _w, _x
from torch import nn
from torch.nn.utils import parametrizations


class Orthogonal(nn.Module):
    def __init__(self):
        super().__init__()
        self.rot = parametrizations.orthogonal(nn.Linear(16, 16), orthogonal_map="matrix_exp")
        self.house = parametrizations.orthogonal(nn.Linear(16, 8), orthogonal_map="householder")

    def forward(self, x):
        return self.house(F.relu(self.rot(x)))


def parametrize_orthogonal():
    return _w("parametrize_orthogonal", Orthogonal().eval(), description="torch.nn.utils.parametrizations."
              "orthogonal with matrix_exp and householder maps: the weight is recomputed at every call",
              modules={"linear": {"rot", "house"}, "relu": {""}}, calls={"linear": 2})  # fmt: skip


class RenormalizedEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8, max_norm=1.0)  # renormalizes the rows it looks up, in place
        self.proj = nn.Linear(8, 8)

    def forward(self, ids):
        return self.proj(self.embed(ids)) + F.embedding(ids, self.embed.weight, max_norm=0.5).sum()


def embedding_max_norm():
    model = RenormalizedEmbedding().eval()
    with torch.no_grad():
        model.embed.weight.mul_(3)
    return _w("embedding_max_norm", model, samples=[((torch.tensor([[1, 2, 3], [3, 4, 5]]),), {})],
              description="nn.Embedding(max_norm=1.0) and F.embedding(max_norm=0.5): rows renormalized in place in "
              "the weight at every call (the first call changes it; later passes find it normalized)",
              modules={"embedding": {"embed", ""}, "linear": {"proj"}}, calls={"embedding": 2},
              reference_warm_up=3)  # fmt: skip


class PaddingModes(nn.Module):
    def __init__(self):
        super().__init__()
        self.circular = nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular")
        self.reflect = nn.Conv1d(4, 4, 3, padding=2, padding_mode="reflect", dilation=2)
        self.replicate = nn.Conv3d(1, 2, 3, padding=1, padding_mode="replicate")

    def forward(self, x):
        h = self.circular(x)
        seq = self.reflect(h.flatten(2))
        return seq, self.replicate(h[:, :1, None].expand(-1, -1, 3, -1, -1).contiguous())


def conv_padding_modes():
    return _w("conv_padding_modes", PaddingModes().eval(), samples=[((_x(2, 3, 6, 6),), {})], description="Conv2d, "
              "Conv1d and Conv3d with circular, reflect and replicate padding: F.pad then the convolution inside "
              "each module's forward", modules={"pad": {"circular", "reflect", "replicate"}, "conv2d": {"circular"},
              "conv1d": {"reflect"}, "conv3d": {"replicate"}}, calls={"pad": 3, "conv2d": 1})  # fmt: skip


class AdaptiveHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(16, 16)
        self.asm = nn.AdaptiveLogSoftmaxWithLoss(16, 40, cutoffs=[8, 20], div_value=2.0)

    def forward(self, x):
        h = torch.tanh(self.body(x))
        return self.asm.log_prob(h), self.asm.predict(h)  # its methods, not its forward


def adaptive_softmax_methods():
    return _w("adaptive_softmax_methods", AdaptiveHead().eval(), description="nn.AdaptiveLogSoftmaxWithLoss called "
              "through log_prob and predict (not its forward): its head and tail Linears are modules of their own",
              modules={"linear": {"body", "asm.head", "asm.tail.0.0", "asm.tail.0.1", "asm.tail.1.0",
              "asm.tail.1.1"}})  # fmt: skip


class HookDicts(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.mid, self.out = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 4)
        self.fc._forward_hooks[90_001] = lambda module, args, out: F.silu(out)  # before profile()
        self.pending = [True]

    def forward(self, x):
        if self.pending[0]:  # at the first call, as a library patching a model lazily might
            self.mid._forward_pre_hooks[90_002] = lambda module, args: (F.softsign(args[0]),)
            self.out._forward_hooks[90_003] = lambda module, args, out: F.hardtanh(out)
            self.pending[0] = False
        return self.out(self.mid(self.fc(x)))


def hook_dicts_written():
    return _w("hook_dicts_written", HookDicts().eval(), description="forward hooks and pre-hooks written straight "
              "into module._forward_hooks / _forward_pre_hooks (no register_* call), before profile() and at the "
              "first call, one warm-up pass", modules={"silu": {"fc"}, "softsign": {"mid"}, "hardtanh": {"out"}},
              calls={"silu": 1, "softsign": 1, "hardtanh": 1}, warmup=1)  # fmt: skip


def _einsum_matmul(a, b, *, out=None):
    return torch.einsum("...ij,...jk->...ik", a, b)


def _looped_bmm(a, b):
    return torch.stack([torch.mm(x, y) for x, y in zip(a.unbind(0), b.unbind(0), strict=True)])


def _vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002 (torch's argument name)
    return x.abs().pow(ord).sum(dim=dim, keepdim=keepdim).pow(1.0 / ord)


def _log_softmax(self, dim, dtype=None):
    return self - torch.logsumexp(self, dim, keepdim=True)


class UsesTorchCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        scores = torch.bmm(torch.matmul(self.proj(x), x.t())[None], x[None].transpose(1, 2).repeat(1, 4, 1)[:, :4])
        return F.gelu(scores).log_softmax(-1), torch.linalg.vector_norm(scores, dim=-1)


def torch_namespace_replaced():
    places = [(torch, "matmul", _einsum_matmul), (torch, "bmm", _looped_bmm),
              (torch.linalg, "vector_norm", _vector_norm), (torch.Tensor, "log_softmax", _log_softmax),
              (F, "gelu", functools.partial(F.gelu, approximate="tanh"))]  # fmt: skip
    originals = [(owner, name, vars(owner).get(name)) for owner, name, _ in places]  # Tensor's: TensorBase's
    for owner, name, replacement in places:
        setattr(owner, name, replacement)

    def put_back():
        for owner, name, original in originals:
            if original is None:
                delattr(owner, name)
            else:
                setattr(owner, name, original)

    return _w("torch_namespace_replaced", UsesTorchCalls().eval(), cleanup=put_back, description="torch.matmul, "
              "torch.bmm and torch.linalg.vector_norm replaced by a library's Python functions and "
              "Tensor.log_softmax by a Python method, F.gelu by a functools.partial forcing approximate='tanh', before "
              "profile()", modules={"torch.matmul": {""}, "torch.bmm": {""}, "torch.linalg.vector_norm": {""},
              "Tensor.log_softmax": {""}, "gelu": {""}}, calls={"torch.matmul": 1, "torch.bmm": 1,
              "torch.linalg.vector_norm": 1, "Tensor.log_softmax": 1, "gelu": 1})  # fmt: skip


class Activation(enum.Enum):
    SOFTPLUS = functools.partial(F.softplus, beta=2.0)
    ELU = enum.member(F.elu)
    SCALED_SILU = (F.silu, 2.0)  # a tuple value: (function, scale)

    def apply(self, x):
        if isinstance(self.value, tuple):
            function, scale = self.value
            return function(x) * scale
        return self.value(x)


FALLBACK = Activation.ELU


@dataclasses.dataclass(slots=True, frozen=True)
class NormConfig:
    norm: object = F.softsign


class HeldActivations(nn.Module):
    GATES = {"sigmoid": F.sigmoid, "nested": (F.hardsigmoid,)}  # a registry as a class attribute

    def __init__(self, kind: str):
        super().__init__()
        self.kind, self.fc, self.cfg = kind, nn.Linear(16, 16), NormConfig()
        self.squash = lambda x, act=F.tanhshrink: act(x)

    def forward(self, x):
        x = Activation[self.kind].apply(self.fc(x))
        x = FALLBACK.value(Activation.SCALED_SILU.apply(x))
        x = self.cfg.norm(self.squash(x))
        return self.GATES["sigmoid"](x) * self.GATES["nested"][0](x)


def held_activations():
    return _w("held_activations", HeldActivations("SOFTPLUS").eval(), description="functionals held as Enum member "
              "values (a partial of F.softplus, enum.member(F.elu), a tuple of F.silu and a scale) read in a method "
              "of the Enum's, in a slotted frozen dataclass config, in a lambda's default, in a registry held as a "
              "class attribute", modules={"softplus": {""}, "elu": {""}, "silu": {""}, "linear": {"fc"},
              "softsign": {""}, "tanhshrink": {""}, "sigmoid": {""}, "hardsigmoid": {""}},
              calls={"softplus": 1, "elu": 1, "silu": 1, "softsign": 1, "tanhshrink": 1, "sigmoid": 1,
              "hardsigmoid": 1})  # fmt: skip


UNSEEN8_MODULE_MECHANISMS = {
    "parametrize_orthogonal": parametrize_orthogonal, "embedding_max_norm": embedding_max_norm,
    "conv_padding_modes": conv_padding_modes, "adaptive_softmax_methods": adaptive_softmax_methods,
    "hook_dicts_written": hook_dicts_written, "torch_namespace_replaced": torch_namespace_replaced,
    "held_activations": held_activations,
}  # fmt: skip
