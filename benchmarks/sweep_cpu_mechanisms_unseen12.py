"""Programs for cpu_sweep.py around mechanisms the earlier program files leave out: a child pickled and ``torch.save``'d
whole inside the forward, ``split_module`` and ``fx.wrap`` graphs and a tracer keeping blocks as leaves, rotary
embeddings in complex numbers, FloatFunctional, ``custom_fwd`` under autocast, vmap's randomness, ``set_stance``
inside a forward, modules and functionals as arguments, ``out=`` tensors, arguments and indices of every kind, a
positional-only and keyword-only forward, a post-accumulate gradient hook, a scripted module's exported method
(sweep_cpu_mechanisms_unseen12_more.py and sweep_cpu_mechanisms_unseen12_handlers.py have more).

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import io
import pickle

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, Net, _w, _x
from torch import nn
from torch.fx.passes.split_module import split_module


class PicklesChild(nn.Module):
    def __init__(self, save: bool):
        super().__init__()
        self.mlp, self.save = Mlp(), save

    def forward(self, x):
        if self.save:
            buffer = io.BytesIO()
            torch.save(self.mlp, buffer)
            buffer.seek(0)
            twin = torch.load(buffer, weights_only=False)
        else:
            twin = pickle.loads(pickle.dumps(self.mlp))
        return self.mlp(x) + twin(x)


def pickle_child_in_forward():
    return _w("pickle_child_in_forward", PicklesChild(save=False).eval(), description="a child pickled and "
              "unpickled inside the forward, both run", calls={"gelu": 2})  # fmt: skip


def torch_save_child_in_forward():
    return _w("torch_save_child_in_forward", PicklesChild(save=True).eval(), description="a whole child "
              "torch.save'd into a BytesIO and torch.load'ed (weights_only=False) in the forward, both run",
              calls={"gelu": 2})  # fmt: skip


def fx_split_module():
    net = Net().eval()
    traced = torch.fx.symbolic_trace(net)
    order = {node: i for i, node in enumerate(traced.graph.nodes)}
    half = len(order) // 2
    split = split_module(traced, net, lambda node: 0 if order[node] < half else 1)
    return _w("fx_split_module", split, description="torch.fx's split_module of a traced Net into two partitions "
              "(submod_0, submod_1 holding the Linears by their old names)", calls={"gelu": 2})  # fmt: skip


def _gated(x, gate):
    return F.silu(x) * torch.sigmoid(gate)


torch.fx.wrap("_gated")  # traced as one call_function node, never traced through


class Wrapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.gate = nn.Linear(16, 16), nn.Parameter(torch.randn(16))

    def forward(self, x):
        return F.layer_norm(_gated(self.fc(x), self.gate), (16,))


def fx_wrapped_function():
    return _w("fx_wrapped_function", torch.fx.symbolic_trace(Wrapped().eval()), description="a GraphModule whose "
              "call_function node is a torch.fx.wrap'd helper calling F.silu", modules={"silu": {""}},
              calls={"silu": 1, "layer_norm": 1})  # fmt: skip


class _BlocksAsLeaves(torch.fx.Tracer):
    def is_leaf_module(self, module, qualname):
        return isinstance(module, Mlp) or super().is_leaf_module(module, qualname)


def fx_leaf_tracer():
    net = Net().eval()
    graph = _BlocksAsLeaves().trace(net)
    return _w("fx_leaf_tracer", torch.fx.GraphModule(net, graph), description="a Tracer keeping the Mlp blocks as "
              "leaves: call_module nodes run them eagerly", modules={"gelu": {"a", "b"}},
              calls={"gelu": 2})  # fmt: skip


class ComplexRope(nn.Module):
    def __init__(self, d: int = 16, n: int = 8):
        super().__init__()
        self.qk = nn.Linear(d, 2 * d)
        angles = torch.outer(torch.arange(n).float(), 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)))
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))

    def rotate(self, t):
        pairs = torch.view_as_complex(t.float().reshape(*t.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * self.freqs_cis).flatten(-2)

    def forward(self, x):
        q, k = (self.rotate(t)[:, None] for t in self.qk(x).chunk(2, dim=-1))
        return F.scaled_dot_product_attention(q, k, k, is_causal=True)[:, 0]


def rope_complex():
    return _w("rope_complex", ComplexRope().eval(), samples=[((_x(2, 8, 16),), {})], description="Llama's rotary "
              "embedding in complex numbers: view_as_complex, a complex64 buffer made by torch.polar, view_as_real",
              modules={"scaled_dot_product_attention": {""}}, calls={"scaled_dot_product_attention": 1})  # fmt: skip


class FloatFunctionals(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 16), nn.Linear(16, 16)
        self.skip, self.join = torch.ao.nn.quantized.FloatFunctional(), torch.ao.nn.quantized.FloatFunctional()

    def forward(self, x):
        h = self.skip.add_relu(self.fc1(x), x)
        return self.join.cat([self.fc2(h), self.skip.mul_scalar(h, 0.5)], dim=-1)


def float_functional():
    return _w("float_functional", FloatFunctionals().eval(), description="torch.ao's FloatFunctional modules "
              "(add_relu, mul_scalar, cat) called through their methods, never their forward",
              modules={"linear": {"fc1", "fc2"}})  # fmt: skip


class Bf16Matmul(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.bfloat16)
    def forward(ctx, x, w):
        return F.gelu(x @ w)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad):
        return grad, grad


class AmpFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.w = nn.Linear(16, 16), nn.Parameter(torch.randn(16, 16))

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = Bf16Matmul.apply(self.fc(x), self.w)
        return out.float()


def amp_custom_fwd():
    return _w("amp_custom_fwd", AmpFunction().eval(), description="an autograd.Function whose forward is "
              "torch.amp.custom_fwd(cast_inputs=bfloat16), under CPU autocast", modules={"gelu": {""}},
              calls={"gelu": 1})  # fmt: skip


class RandomEnsemble(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        with torch.random.fork_rng():
            torch.manual_seed(7)
            stacked = x.expand(3, *x.shape)
            different = torch.vmap(lambda t: F.dropout(self.mlp(t), 0.3, training=True), randomness="different")
            same = torch.vmap(lambda t: F.dropout(self.mlp(t), 0.3, training=True), randomness="same")
            return different(stacked) + same(stacked)


def vmap_randomness():
    return _w("vmap_randomness", RandomEnsemble().eval(), description="vmap with randomness='different' and "
              "'same' over a child and a training-mode F.dropout, seeded under fork_rng in the forward",
              calls={"dropout": 2, "gelu": 2})  # fmt: skip


class StanceSwitch(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.head = torch.compile(Mlp(), backend="aot_eager"), nn.Linear(16, 4)

    def forward(self, x):
        with torch.compiler.set_stance("force_eager"):
            eager = self.mlp(x)
        return self.head(self.mlp(x) + eager)


def set_stance_in_forward():
    return _w("set_stance_in_forward", StanceSwitch().eval(), description="a compiled child (aot_eager) called "
              "under torch.compiler.set_stance('force_eager') and then compiled, in one forward")  # fmt: skip


class Apply(nn.Module):
    def forward(self, x, layer: nn.Module, act=None):
        return (act or F.silu)(layer(x))


class TakesModules(nn.Module):
    def __init__(self):
        super().__init__()
        self.apply_, self.fc1, self.fc2 = Apply(), nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x, outside: nn.Module):
        return outside(self.apply_(self.apply_(x, self.fc1), self.fc2, act=F.tanh))


def modules_as_arguments():
    return _w("modules_as_arguments", TakesModules().eval(), samples=[((_x(), nn.Linear(16, 4).eval()), {})],
              description="a forward taking a module and a functional as arguments, the root taking a Linear the "
              "model does not hold as a sample", modules={"silu": {"apply_"}, "tanh": {"apply_"}},
              calls={"silu": 1, "tanh": 1, "linear": 3})  # fmt: skip


class OutTensors(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(x)
        buf, square = torch.empty_like(h), torch.empty(h.shape[0], h.shape[0])
        torch.add(h, 1.0, out=buf)
        torch.tanh(buf, out=buf)
        torch.matmul(buf, buf.t(), out=square)
        torch.softmax(square, dim=-1, out=square)
        return square, torch.sum(buf, dim=0, out=torch.empty(16))


def out_tensors():
    return _w("out_tensors", OutTensors().eval(), description="torch functions writing into out= tensors "
              "(add, tanh in place of its input, matmul, softmax, sum)", modules={"linear": {"fc"}})  # fmt: skip


class OddArguments(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x).to(memory_format=torch.channels_last)
        y = F.interpolate(y, size=torch.Size([12, 12]), mode="bilinear", align_corners=False)
        y = F.softmax(y[..., ::2, None, 1:], dim=-1, dtype=torch.float64)
        y = y + torch.full(y.shape, 0.5, dtype=torch.float64, device=torch.device("cpu"))
        y = y[torch.tensor([1, 0, 1]), :, [True, False] * 3]
        return F.adaptive_avg_pool2d(y.flatten(2, 3), (2, 2)), y.new_zeros(y.shape[1:], dtype=torch.bfloat16)


def odd_argument_types():
    return _w("odd_argument_types", OddArguments().eval(), samples=[((_x(2, 3, 8, 8),), {})],
              description="arguments of every kind: a torch.Size, dtypes, a memory format, a device, indices with "
              "Ellipsis, None, steps, index tensors and a bool list", modules={"conv2d": {"conv"}},
              calls={"interpolate": 1, "softmax": 1})  # fmt: skip


class PositionalOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x, /, scale=1.0, *extra, mask=None, **options):
        h = F.gelu(self.fc(x)) * scale + sum(extra)
        h = h.masked_fill(mask, 0.0) if mask is not None else h
        return F.softmax(h / options.get("temperature", 1.0), dim=-1)


def positional_only_forward():
    x = _x()
    samples = [((x, 2.0, x, x), {"mask": x > 1, "temperature": 0.5}), ((x,), {})]
    return _w("positional_only_forward", PositionalOnly().eval(), samples=samples, description="forward(self, x, "
              "/, scale=1.0, *extra, mask=None, **options), called with and without every optional part",
              modules={"gelu": {""}, "linear": {"fc"}}, calls={"gelu": 2, "softmax": 2})  # fmt: skip


class GradStatistics(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        stats = []
        handle = self.fc.weight.register_post_accumulate_grad_hook(
            lambda p: stats.append(F.normalize(p.grad.flatten(), dim=0).abs().sum())
        )
        try:
            with torch.enable_grad():
                F.mse_loss(self.fc(x), x).backward()
        finally:
            handle.remove()
            self.fc.weight.grad = self.fc.bias.grad = None
        return self.head(x) + stats[0]


def post_accumulate_grad_hook():
    return _w("post_accumulate_grad_hook", GradStatistics().eval(), description="a post-accumulate-grad hook on a "
              "weight (an optimizer-in-backward's place) calling F.normalize, fired by a backward in the forward",
              calls={"normalize": 1, "mse_loss": 1})  # fmt: skip


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return F.relu(self.fc(x))

    @torch.jit.export
    def encode(self, x):
        return F.gelu(self.fc(x)) * 2


class ScriptedEncode(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.head = torch.jit.script(Encoder()), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.enc.encode(x) + self.enc(x))


def jit_exported_method():
    return _w("jit_exported_method", ScriptedEncode().eval(), description="a ScriptModule's @torch.jit.export "
              "method called from an eager forward besides its forward")  # fmt: skip


UNSEEN12_MECHANISMS = {
    f.__name__: f
    for f in (pickle_child_in_forward, torch_save_child_in_forward, fx_split_module, fx_wrapped_function,
              fx_leaf_tracer, rope_complex, float_functional,
              amp_custom_fwd, vmap_randomness, set_stance_in_forward, modules_as_arguments, out_tensors,
              odd_argument_types, positional_only_forward, post_accumulate_grad_hook, jit_exported_method)
}  # fmt: skip
