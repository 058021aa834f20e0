"""Programs for cpu_sweep.py around mechanisms the earlier program files leave out: an ``nn.Sequential`` of the
user's ``Lambda`` modules, ``default_collate`` inside a forward, a dict subclass returned, a forward returning a
generator its caller consumes, tensor and multi-grad hooks of a backward run in the forward, ``torch.func.grad``,
packed and padded sequences, rarely used functionals (masked_scatter, index_put_, segment_reduce, pdist,
local_response_norm, channel_shuffle, fake quantization), Python operators on tensors (``@``, ``**``, ``%``,
``~``), ``torch.save``/``torch.load`` round trips, ``clip_grad_norm_`` after a backward in the forward, the split
family and storage views, Gumbel sampling under ``fork_rng`` and a seeded ``torch.Generator``, the mkldnn backend
switched off around a convolution, ``torch._check`` and ``torch.sym_*`` helpers, one child under two names and a
plain attribute, ``torch.fx.symbolic_trace``, ``make_fx`` and ``torch.jit.script`` of a child inside the forward.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import functools
import io
import operator

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, _w
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import default_collate


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def lambda_sequential():
    model = nn.Sequential(nn.Linear(16, 16), Lambda(lambda t: F.gelu(t)),
                          Lambda(functools.partial(F.layer_norm, normalized_shape=(16,))),
                          nn.Sequential(Lambda(torch.tanh), nn.Linear(16, 4)))  # fmt: skip
    return _w("lambda_sequential", model.eval(),
              description="an nn.Sequential of the user's Lambda modules holding a lambda, a functools.partial of a "
              "functional and torch.tanh, one in a nested Sequential", modules={"gelu": {"1"},
              "layer_norm": {"2"}, "torch.tanh": {"3.0"}, "linear": {"0", "3.1"}},
              calls={"gelu": 1, "layer_norm": 1, "torch.tanh": 1})  # fmt: skip


class Collating(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        batch = default_collate([{"x": row, "n": row.sum()} for row in x.unbind(0)])
        return F.silu(self.fc(batch["x"])) * batch["n"].unsqueeze(-1)


def default_collate_forward():
    return _w("default_collate_forward", Collating().eval(),
              description="torch.utils.data.default_collate of a list of dicts inside the forward (torch.stack "
              "called from torch's own code)", modules={"silu": {""}, "linear": {"fc"}}, calls={"silu": 1})  # fmt: skip


class AttrDict(dict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


class ReturnsDictSubclass(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        hidden = F.relu(self.fc(x))
        return AttrDict(hidden=hidden, logits=F.log_softmax(self.head(hidden), -1))


def dict_subclass_output():
    model = ReturnsDictSubclass().eval()
    return _w("dict_subclass_output", model, fn=lambda x: model(x).logits.exp(),
              description="a forward returning a dict subclass with attribute access, read by the caller",
              modules={"relu": {""}, "log_softmax": {""}, "linear": {"fc", "head"}},
              calls={"relu": 1, "log_softmax": 1})  # fmt: skip


class Chunked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return (F.gelu(self.fc(chunk)) for chunk in x.chunk(2))  # run when the caller consumes it


def generator_output():
    model = Chunked().eval()
    return _w("generator_output", model, fn=lambda x: torch.cat(list(model(x))),
              description="a forward returning a generator expression the caller consumes after the call returned",
              modules={"linear": {"fc"}}, calls={"gelu": 2})  # fmt: skip


class GradHooks(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            y = F.softplus(self.fc(x))
            y.register_hook(lambda g: F.normalize(g, dim=-1))
            z, seen = y.square(), []
            torch.autograd.graph.register_multi_grad_hook((y, z), lambda grads: seen.append(len(grads)))
            (grad,) = torch.autograd.grad(z.sum(), x)
        return y.detach() + grad


def tensor_grad_hooks():
    return _w("tensor_grad_hooks", GradHooks().eval(),
              description="a tensor hook and a multi-grad hook registered in the forward, fired by an "
              "autograd.grad there", modules={"softplus": {""}, "normalize": {""}},
              calls={"normalize": 1, "softplus": 1})  # fmt: skip


class FuncGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return torch.func.grad(lambda t: F.softplus(self.fc(t)).sum())(x)


def func_grad_forward():
    return _w("func_grad_forward", FuncGrad().eval(), description="torch.func.grad of a closure over a child",
              modules={"softplus": {""}, "linear": {"fc"}}, calls={"softplus": 1})  # fmt: skip


class PackedGru(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru, self.head = nn.GRU(16, 8, batch_first=True), nn.Linear(8, 4)

    def forward(self, x, lengths):
        padded = pad_sequence([x[i, :n] for i, n in enumerate(lengths.tolist())], batch_first=True)
        out, _ = self.gru(pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False))
        out, _ = pad_packed_sequence(out, batch_first=True)
        return self.head(out)


def packed_padded_gru():
    samples = [((torch.randn(3, 6, 16), torch.tensor([6, 2, 4])), {}), ((torch.randn(2, 5, 16), torch.tensor([3, 5])),
                                                                      {})]  # fmt: skip
    return _w("packed_padded_gru", PackedGru().eval(), samples=samples,
              description="pad_sequence, pack_padded_sequence (unsorted) into a GRU and pad_packed_sequence back",
              modules={"linear": {"head"}})  # fmt: skip


class RareFunctionals(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(x)
        h = h.masked_scatter(h > 0, torch.arange(h.numel(), dtype=h.dtype))
        h = h.clone().index_put_((torch.tensor([0, 1]),), torch.zeros(16), accumulate=True)
        sums = torch.segment_reduce(h.flatten(), "sum", lengths=torch.tensor([16] * h.shape[0]))
        image = h.reshape(1, -1, 4, 4)
        image = F.local_response_norm(F.channel_shuffle(image, 2), 2)
        q = torch.fake_quantize_per_tensor_affine(image, 0.1, 0, -128, 127)
        return F.pdist(h).sum() + F.cosine_similarity(h, x).sum() + sums.sum() + q.sum()


def rare_functionals():
    return _w("rare_functionals", RareFunctionals().eval(),
              description="masked_scatter, index_put_ (accumulating), segment_reduce, channel_shuffle, "
              "local_response_norm, fake_quantize_per_tensor_affine, pdist, cosine_similarity",
              modules={"pdist": {""}, "cosine_similarity": {""}, "local_response_norm": {""}},
              calls={"pdist": 1, "cosine_similarity": 1, "local_response_norm": 1, "channel_shuffle": 1})  # fmt: skip


class Operators(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 16))

    def forward(self, x):
        h = operator.matmul(x, self.w) + (x @ self.w.T) ** 2
        quotient, remainder = h // 3.0, h % 3.0
        mask = ~(h > 0)
        return -abs(quotient) + remainder * mask + (2 - h) // 2


def python_operators():
    return _w("python_operators", Operators().eval(),
              description="Python operators on tensors: operator.matmul, @, **, %, ~, abs, unary minus, //, "
              "a reflected subtraction")  # fmt: skip


class SavesAndLoads(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        buffer = io.BytesIO()
        torch.save({"h": F.elu(self.fc(x))}, buffer)
        buffer.seek(0)
        return F.elu(torch.load(buffer, weights_only=True)["h"])


def save_load_roundtrip():
    return _w("save_load_roundtrip", SavesAndLoads().eval(),
              description="torch.save into a BytesIO and torch.load(weights_only=True) back inside the forward",
              modules={"elu": {""}, "linear": {"fc"}}, calls={"elu": 2})  # fmt: skip


class ClipsGrads(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        with torch.enable_grad():
            F.mse_loss(self.head(F.relu(self.fc(x))), torch.zeros(x.shape[0], 4)).backward()
        norm = nn.utils.clip_grad_norm_(self.parameters(), 1.0)
        self.zero_grad(set_to_none=True)
        return self.head(F.relu(self.fc(x))) * norm


def clip_grad_norm_forward():
    return _w("clip_grad_norm_forward", ClipsGrads().eval(),
              description="a backward of a loss, clip_grad_norm_ (foreach) and zero_grad inside the forward",
              modules={"mse_loss": {""}, "relu": {""}, "linear": {"fc", "head"}},
              calls={"mse_loss": 1, "relu": 2})  # fmt: skip


class Splits(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(x)
        a, b = torch.split(h, [6, 10], dim=-1)
        c = torch.tensor_split(h, 3, dim=-1)
        flat = h.flatten()
        view = torch.empty(0).set_(flat.untyped_storage(), 0, (4, 4), (1, 4))
        return a.sum(-1) + b.sum(-1) + sum(t.sum(-1) for t in c) + h.unflatten(-1, (4, 4)).mean((-1, -2)) + view.sum()


def split_family():
    return _w("split_family", Splits().eval(),
              description="torch.split with sizes, tensor_split, unflatten and a tensor set_ onto another's storage",
              modules={"linear": {"fc"}})  # fmt: skip


class Gumbel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)

    def forward(self, x):
        logits = self.fc(x)
        with torch.random.fork_rng():
            torch.manual_seed(3)
            soft = F.gumbel_softmax(logits, tau=0.5, hard=True)
        generator = torch.Generator().manual_seed(11)
        picked = torch.multinomial(F.softmax(logits, -1), 2, generator=generator)
        return soft + F.one_hot(picked[:, 0], 8) + torch.rand(logits.shape, generator=generator)


def gumbel_seeded():
    return _w("gumbel_seeded", Gumbel().eval(),
              description="F.gumbel_softmax under fork_rng and manual_seed, multinomial and rand from a seeded "
              "torch.Generator (outputs bit-identical only if the recorder draws no random numbers)",
              modules={"gumbel_softmax": {""}, "softmax": {""}}, calls={"gumbel_softmax": 1})  # fmt: skip


class NoMkldnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.conv2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        with torch.backends.mkldnn.flags(enabled=False):
            h = F.relu(self.conv(x))
        torch.backends.mkldnn.set_flags(not torch.backends.mkldnn.enabled)
        try:
            return self.conv2(h)
        finally:
            torch.backends.mkldnn.set_flags(not torch.backends.mkldnn.enabled)


def mkldnn_flags_forward():
    return _w("mkldnn_flags_forward", NoMkldnn().eval(), samples=[((torch.randn(2, 3, 8, 8),), {})],
              description="torch.backends.mkldnn.flags(enabled=False) around a convolution, and set_flags toggled "
              "and restored around another", modules={"conv2d": {"conv", "conv2"}, "relu": {""}},
              calls={"relu": 1})  # fmt: skip


class SymChecks(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        torch._check(x.shape[-1] == 16, lambda: "width")
        width = torch.sym_max(x.shape[0], 2)
        return F.hardswish(self.fc(x))[: torch.sym_int(width)]


def sym_checks():
    return _w("sym_checks", SymChecks().eval(), description="torch._check with a message callable, torch.sym_max and "
              "torch.sym_int on plain ints", modules={"hardswish": {""}}, calls={"hardswish": 1})  # fmt: skip


class SharedUnderNames(nn.Module):
    def __init__(self):
        super().__init__()
        shared = nn.Linear(16, 16)
        self.first, self.second = shared, shared
        object.__setattr__(self, "plain", shared)  # a plain attribute: not in _modules

    def forward(self, x):
        return F.gelu(self.plain(F.gelu(self.second(F.gelu(self.first(x))))))


def shared_child_names():
    return _w("shared_child_names", SharedUnderNames().eval(),
              description="one Linear registered under two names and also held in a plain attribute, called "
              "through each", modules={"gelu": {""}}, calls={"gelu": 3, "linear": 3})  # fmt: skip


class TracesChild(nn.Module):
    """Traces its child with torch.fx at each call and runs the GraphModule (a quantization pass's calibration)."""

    def __init__(self):
        super().__init__()
        self.mlp, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        graph = torch.fx.symbolic_trace(self.mlp)
        return self.head(graph(x))


def fx_trace_in_forward():
    return _w("fx_trace_in_forward", TracesChild().eval(),
              description="torch.fx.symbolic_trace of a recorded child at each call, its GraphModule run (whose "
              "code calls torch._C._nn.gelu: named gelu all the same); fx's calls on Proxies are not the program's",
              modules={"linear": {"mlp.fc1", "mlp.fc2", "head"}, "layer_norm": {"mlp.norm"}, "gelu": {""}},
              calls={"gelu": 1, "layer_norm": 1, "linear": 3})  # fmt: skip


class ScriptsChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(torch.jit.script(self.mlp)(x))


def jit_script_in_forward():
    return _w("jit_script_in_forward", ScriptsChild().eval(),
              description="torch.jit.script of a recorded child at each call, the ScriptModule run")  # fmt: skip


class MakesFx(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        graph = make_fx(lambda t: F.silu(self.mlp(t)))(x)  # traced on real tensors: its calls launch kernels
        return self.head(graph(x))


def make_fx_in_forward():
    return _w("make_fx_in_forward", MakesFx().eval(),
              description="make_fx of a closure over a recorded child at each call (real tensors: its tracing runs "
              "the child's kernels, which keep their names), the traced graph run",
              modules={"linear": {"mlp.fc1", "mlp.fc2", "head"}, "gelu": {"mlp"}},
              calls={"gelu": 1, "silu": 1})  # fmt: skip


UNSEEN10_MECHANISMS = {
    f.__name__: f
    for f in (lambda_sequential, default_collate_forward, dict_subclass_output, generator_output, tensor_grad_hooks,
              func_grad_forward, packed_padded_gru, rare_functionals, python_operators, save_load_roundtrip,
              clip_grad_norm_forward, split_family, gumbel_seeded, mkldnn_flags_forward, sym_checks,
              shared_child_names, fx_trace_in_forward, jit_script_in_forward,
              make_fx_in_forward)
}  # fmt: skip
