"""Programs for cpu_sweep.py around mechanisms the earlier program files leave out: ``torch.func.vjp``, ``jacfwd``,
``linearize`` and ``functionalize`` of children, a ``torch.cond`` nested in another,
FlexAttention with a block mask built per call and grouped query heads, ``torch.library`` ops that mutate their
argument (compiled), return a tuple with a kernel registered over them, or are defined by a ``Library`` and
compiled, SDPA on jagged nested tensors, float16 dynamic quantization, autocast inside a compiled forward, an fp8
``_scaled_mm`` linear and parametrizations under ``torch.compile``.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, _w, _x
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

FLEX = "torch.nn.attention.flex_attention."


class FuncVjpJacfwd(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        out, pull = torch.func.vjp(self.a, x)
        (grad,) = pull(torch.ones_like(out))
        jac = torch.func.jacfwd(lambda t: F.softsign(self.b(t)))(x[0])
        return grad + out + jac.sum(0).sum()


def func_vjp_jacfwd():
    return _w("func_vjp_jacfwd", FuncVjpJacfwd().eval(),
              description="torch.func.vjp of a child and its pullback, jacfwd of a closure over another child",
              modules={"softsign": {""}, "layer_norm": {"a.norm"}}, calls={"softsign": 1})  # fmt: skip


class Linearized(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        out, jvp_fn = torch.func.linearize(self.mlp, x)
        return out + jvp_fn(torch.ones_like(x))


def func_linearize():
    return _w("func_linearize", Linearized().eval(),
              description="torch.func.linearize of a child (make_fx traces it), the linearized function "
              "run")  # fmt: skip


class Functionalized(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        def mutating(t):
            t = t.clone()
            t.add_(1.0).mul_(0.5)
            return F.elu(self.mlp(t))

        return torch.func.functionalize(mutating)(x)


def functionalize_forward():
    return _w("functionalize_forward", Functionalized().eval(),
              description="torch.func.functionalize of a closure with in-place ops over a child",
              modules={"elu": {""}, "gelu": {"mlp"}}, calls={"elu": 1, "gelu": 1})  # fmt: skip


class NestedCond(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        def inner(t):
            return torch.cond(t.mean() > 0, lambda u: F.relu(self.b(u)), lambda u: F.tanh(self.c(u)), (t,))

        return torch.cond(x.sum() > 0, inner, lambda t: F.gelu(self.a(t)), (x,))


def cond_nested_eager():
    samples = [((_x().abs(),), {}), ((-_x().abs(),), {})]
    return _w("cond_nested_eager", NestedCond().eval(), samples=samples,
              description="torch.cond whose true branch is another torch.cond, children in every branch, "
              "eager")  # fmt: skip


class FlexGqa(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.kv = nn.Linear(32, 32), nn.Linear(32, 32)
        self.bias = nn.Parameter(torch.randn(4))

    def forward(self, x, documents):
        b, n, _ = x.shape
        q = self.q(x).view(b, n, 4, 8).transpose(1, 2)
        k, v = self.kv(x).view(b, n, 2, 16).transpose(1, 2).chunk(2, dim=-1)  # two key-value heads

        def same_document(batch, head, qi, ki):
            return (documents[batch, qi] == documents[batch, ki]) & (qi >= ki)

        mask = create_block_mask(same_document, b, None, n, n, device=x.device, BLOCK_SIZE=8)
        out = flex_attention(q, k, v, score_mod=lambda s, bi, h, qi, ki: s + self.bias[h], block_mask=mask,
                             enable_gqa=True)  # fmt: skip
        return out.transpose(1, 2).reshape(b, n, 32)


def flex_attention_gqa_documents():
    documents = torch.tensor([[0] * 5 + [1] * 11, [0] * 9 + [1] * 7])
    return _w("flex_attention_gqa_documents", FlexGqa().eval(), samples=[((_x(2, 16, 32), documents), {})],
              description="FlexAttention eager with a document block mask built in each forward from a captured "
              "tensor, a score_mod reading a Parameter, enable_gqa: the kernels of the functions imported by name "
              "are theirs",
              calls={FLEX + "flex_attention": 1, FLEX + "create_block_mask": 1})  # fmt: skip


@torch.library.custom_op("ksunseen11::scale_into", mutates_args=("out",))
def scale_into(x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(x * 2.0)


@scale_into.register_fake
def _(x, out):
    return None


class MutatingOp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        out = torch.empty_like(x)
        scale_into(self.fc(x), out)
        return F.gelu(out)


def custom_op_mutating_compiled():
    model = MutatingOp().eval()
    return _w("custom_op_mutating_compiled", torch.compile(model, backend="aot_eager"), description="a "
              "torch.library.custom_op that mutates its out argument (register_fake), compiled aot_eager")  # fmt: skip


@torch.library.custom_op("ksunseen11::split_norm", mutates_args=())
def split_norm(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.abs(), x.norm(dim=-1)


@torch.library.register_kernel("ksunseen11::split_norm", "cpu")
def _(x):
    return x.abs() + 0.0, torch.linalg.vector_norm(x, dim=-1)


class TupleOp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        magnitude, norms = torch.ops.ksunseen11.split_norm(self.fc(x))
        return F.softplus(magnitude) * norms.unsqueeze(-1)


def custom_op_tuple_kernel():
    return _w("custom_op_tuple_kernel", TupleOp().eval(),
              description="a custom_op returning a tuple with a CPU kernel registered over it by register_kernel, "
              "called through torch.ops", modules={"softplus": {""}, "linear": {"fc"}},
              calls={"softplus": 1})  # fmt: skip


_LIBRARY = torch.library.Library("ksunseen11lib", "DEF")  # held: the ops go when it is collected
_LIBRARY.define("shifted_relu(Tensor x, float shift) -> Tensor")
_LIBRARY.impl("shifted_relu", lambda x, shift: torch.relu(x - shift), "CPU")
torch.library.register_fake("ksunseen11lib::shifted_relu", lambda x, shift: torch.empty_like(x))


class LibraryDefined(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(torch.ops.ksunseen11lib.shifted_relu(self.fc(x), 0.1))


def library_define_compiled():
    model = LibraryDefined().eval()
    return _w("library_define_compiled", torch.compile(model, backend="aot_eager"), description="an op defined by "
              "a torch.library.Library, impl'd for CPU with register_fake, compiled aot_eager")  # fmt: skip


class JaggedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(16, 48), nn.Linear(16, 16)

    def forward(self, parts):
        nt = torch.nested.nested_tensor(parts, layout=torch.jagged)
        q, k, v = (t.contiguous().unflatten(-1, (2, 8)).transpose(1, 2) for t in self.qkv(nt).chunk(3, dim=-1))
        att = F.scaled_dot_product_attention(q, k, v)
        return self.out(att.transpose(1, 2).flatten(-2)).values()


def jagged_sdpa():
    parts = [_x(n, 16) for n in (3, 7, 5)]
    return _w("jagged_sdpa", JaggedAttention().eval(), samples=[((parts,), {})],
              description="SDPA over jagged nested tensors (q, k, v unflattened to heads), a Linear after",
              modules={"scaled_dot_product_attention": {""}, "linear": {"qkv", "out"}})  # fmt: skip


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.lstm, self.head = nn.Linear(16, 16), nn.LSTM(16, 8, batch_first=True), nn.Linear(8, 4)

    def forward(self, x):
        out, _ = self.lstm(F.relu(self.fc(x)))
        return self.head(out[:, -1])


def quantize_dynamic_fp16():
    model = torch.ao.quantization.quantize_dynamic(Recurrent().eval(), {nn.Linear, nn.LSTM}, dtype=torch.float16)
    return _w("quantize_dynamic_fp16", model, samples=[((_x(2, 5, 16),), {})],
              description="quantize_dynamic to float16 of Linears and an LSTM", modules={"relu": {""}})  # fmt: skip


class AutocastInside(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = self.mlp(x)
        return self.head(h.float())


def autocast_compiled():
    return _w("autocast_compiled", torch.compile(AutocastInside().eval(), backend="aot_eager"),
              description="torch.autocast(cpu, bfloat16) inside a forward compiled with aot_eager")  # fmt: skip


class Fp8Linear(nn.Module):
    def __init__(self):
        super().__init__()
        weight = torch.randn(32, 16)
        self.scale = weight.abs().amax() / 448.0
        self.register_buffer("weight", (weight / self.scale).to(torch.float8_e4m3fn))

    def forward(self, x):
        x_scale = x.abs().amax() / 448.0
        x8 = (x / x_scale).to(torch.float8_e4m3fn)
        return torch._scaled_mm(x8, self.weight.t(), scale_a=x_scale.float(), scale_b=self.scale.float(),
                                out_dtype=torch.float32)  # fmt: skip


class Fp8Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj, self.head = Fp8Linear(), nn.Linear(32, 4)

    def forward(self, x):
        return self.head(F.gelu(self.proj(x)))


def scaled_mm_fp8():
    return _w("scaled_mm_fp8", Fp8Model().eval(), samples=[((_x(16, 16),), {})],
              description="a user's fp8 linear: float8_e4m3fn weights and torch._scaled_mm with per-tensor scales",
              modules={"gelu": {""}, "linear": {"head"}}, calls={"gelu": 1})  # fmt: skip


def parametrized_compiled():
    model = Mlp().eval()
    nn.utils.parametrizations.weight_norm(model.fc1)
    nn.utils.parametrizations.orthogonal(model.fc2)
    return _w("parametrized_compiled", torch.compile(model, backend="aot_eager"),
              description="parametrizations.weight_norm and orthogonal (new API) on a module compiled "
              "aot_eager")  # fmt: skip


UNSEEN11_MECHANISMS = {
    f.__name__: f
    for f in (func_vjp_jacfwd, func_linearize, functionalize_forward, cond_nested_eager,
              flex_attention_gqa_documents, custom_op_mutating_compiled, custom_op_tuple_kernel,
              library_define_compiled, jagged_sdpa, quantize_dynamic_fp16, autocast_compiled, scaled_mm_fp8,
              parametrized_compiled)
}  # fmt: skip
