"""Programs for cpu_sweep.py around tensors and calls of unusual kinds that the other sweep files leave out: a batch
of zero rows, mixture-of-experts routing that leaves experts without tokens, an integer-only model, float8 and
unsigned dtypes, views of odd strides, shapes inferred on the meta device inside a forward, mkldnn tensors,
functionals a library replaced before profile(), ``torch.jit.trace`` and ``torch.compile`` of code in every
forward, a module imported inside a forward, an autograd.Function with a vmap rule under vmap, a selective scan
stepped in Python, 300 distinct input signatures of one call, ``vmap`` of ``functional_call`` over the observed model
as the profiled function.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, Net, _w, _x
from torch import nn
from workload import Workload


def zero_size_batch():
    samples = [((_x(0, 16),), {}), ((_x(3, 16),), {}), ((_x(0, 16),), {})]
    return _w("zero_size_batch", Net().eval(), samples=samples, description="batches of zero rows between one of "
              "three (operators run on empty tensors)", modules={"gelu": {"a", "b"}, "torch.relu": {""}},
              calls={"gelu": 6, "torch.relu": 3})  # fmt: skip


class SparseMoE(nn.Module):
    def __init__(self, experts: int = 4):
        super().__init__()
        self.router = nn.Linear(16, experts)
        self.experts = nn.ModuleList(Mlp() for _ in range(experts))

    def forward(self, x):
        weights = F.softmax(self.router(x), dim=-1)
        choice = weights.argmax(-1)
        choice = torch.where(choice == 3, torch.zeros_like(choice), choice)  # expert 3 never gets a token
        out = torch.zeros_like(x)
        for i, expert in enumerate(self.experts):
            rows = (choice == i).nonzero().squeeze(-1)
            picked = expert(x.index_select(0, rows))  # zero rows for an expert no token chose
            out.index_add_(0, rows, picked * weights.index_select(0, rows)[:, i : i + 1])
        return out


def moe_empty_experts():
    return _w("moe_empty_experts", SparseMoE().eval(), samples=[((_x(6, 16),), {})], description="top-1 routing "
              "with torch.where, index_select and index_add_; one expert always gets zero tokens",
              modules={"gelu": {f"experts.{i}" for i in range(4)}, "softmax": {""}},
              calls={"gelu": 4, "softmax": 1})  # fmt: skip


class Hashing(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("boundaries", torch.tensor([10, 100, 1000, 10000]))
        self.table = nn.Embedding(64, 8)
        self.register_buffer("mix", torch.randint(-3, 4, (8, 8)))

    def forward(self, ids):
        h = (ids * 2654435761) ^ (ids >> 3)
        h = torch.remainder(h, 64)
        buckets = torch.bucketize(ids, self.boundaries)
        pos = torch.searchsorted(self.boundaries, ids.clamp(max=9999).contiguous())
        counts = torch.cumsum(buckets, dim=-1) + pos
        scores = (counts @ self.mix[: counts.shape[-1]]).to(torch.int32)  # an integer matmul
        return scores, torch.argsort(h, dim=-1, stable=True), F.one_hot(h, 64).sum(1)


def integer_only():
    ids = torch.randint(0, 20000, (4, 8))
    return _w("integer_only", Hashing().eval(), samples=[((ids,), {})], description="an integer-only model: "
              "multiplicative hashing, xor and shifts, remainder, bucketize, searchsorted, cumsum, an int64 matmul, "
              "stable argsort, one_hot", modules={"one_hot": {""}}, calls={"one_hot": 1})  # fmt: skip


class OddDtypes(nn.Module):
    def forward(self, x):
        f8 = x.to(torch.float8_e4m3fn)
        u16, u32, u64 = (x.abs() * 100).to(torch.uint16), (x.abs() * 100).to(torch.uint32), x.abs().to(torch.uint64)
        half_complex = torch.complex(x, x).to(torch.complex32)
        flags = x > 0
        joined = torch.cat([f8.to(torch.float32), u16.to(torch.float32), u32.to(torch.float32)], dim=-1)
        kept = torch.where(flags, x, torch.zeros_like(x))
        padded = F.pad(u16.to(torch.int32), (1, 1))
        return joined, kept, padded, u64.sum(), half_complex.to(torch.complex64).abs(), torch.logical_xor(flags, flags)


def odd_dtypes():
    return _w("odd_dtypes", OddDtypes().eval(), description="float8_e4m3fn, uint16, uint32, uint64, complex32 and "
              "bool tensors as the arguments of torch calls and F.pad (the sample store keeps each dtype)",
              modules={"pad": {""}}, calls={"pad": 1})  # fmt: skip


class Views(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pool", torch.randn(512, 1024))  # 2 MiB

    def forward(self, x):
        one = self.pool[7:8, :16]  # a view of one row of a large storage
        broadcast = x[:1].expand(4, 16)  # stride 0
        overlapping = torch.as_strided(self.pool, (4, 16), (3, 1))  # rows overlap in memory
        transposed = x.t().contiguous().t()  # column-major
        return F.layer_norm(one + broadcast, (16,)), F.gelu(overlapping), F.softplus(transposed)


def strided_views():
    return _w("strided_views", Views().eval(), description="functional arguments that are views: one row of a "
              "2 MiB buffer, an expanded (stride 0) tensor, overlapping as_strided rows, a column-major tensor "
              "(the sample store keeps their strides)", modules={"gelu": {""}, "softplus": {""}, "layer_norm": {""}},
              calls={"gelu": 1, "softplus": 1, "layer_norm": 1})  # fmt: skip


class MetaPlanned(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        probe = torch.empty(x.shape, device="meta")
        with torch.no_grad():
            planned = F.layer_norm(F.linear(probe, self.head.weight.to("meta")), (4,))  # shapes only
        out = self.head(self.body(x))
        return out.reshape(planned.shape)


def meta_shape_inference():
    return _w("meta_shape_inference", MetaPlanned().eval(), description="a forward that infers its output shape "
              "with meta tensors through F.linear and F.layer_norm before computing",
              modules={"gelu": {"body"}, "layer_norm": {"", "body.norm"}, "linear": {"", "body.fc1", "body.fc2",
              "head"}}, calls={"layer_norm": 2, "linear": 4})  # fmt: skip


class Mkldnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        dense = self.conv(x.to_mkldnn()).to_dense()  # a conv on an mkldnn tensor (its weights stay dense)
        return F.relu(dense)


def mkldnn_layout():
    return _w("mkldnn_layout", Mkldnn().eval(), samples=[((_x(1, 3, 8, 8),), {})], description="an mkldnn-layout "
              "input through a Conv2d (the sample store meets a tensor without storage)",
              modules={"relu": {""}, "conv2d": {"conv"}}, calls={"conv2d": 1})  # fmt: skip


def _library_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    return torch.softmax(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5, dim=-1) @ v


def _library_gelu(x, approximate="none"):
    return x * torch.sigmoid(1.702 * x)


def _noisy_linear(self, x):  # bound on torch's nn.Linear: no longer one functional call
    return F.linear(x, self.weight, self.bias) + torch.tanh(x @ self.weight.t()) * 0.1


class Attends(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj, self.out = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        q = self.proj(x).view(1, 4, 4, 4)
        return self.out(F.gelu(F.scaled_dot_product_attention(q, q, q).reshape(4, 16)))


def library_replaced_functionals():
    originals = F.scaled_dot_product_attention, F.gelu, nn.Linear.forward
    F.scaled_dot_product_attention, F.gelu = _library_attention, _library_gelu  # as SageAttention's use does
    nn.Linear.forward = _noisy_linear

    def put_back():
        F.scaled_dot_product_attention, F.gelu, nn.Linear.forward = originals

    return _w("library_replaced_functionals", Attends().eval(), cleanup=put_back, description="F.scaled_dot_product_"
              "attention and F.gelu replaced by a library's Python functions, nn.Linear.forward by one making more "
              "calls, before profile()", modules={"scaled_dot_product_attention": {""}, "gelu": {""},
              "torch.tanh": {"proj", "out"}, "aten::t": {"proj", "out"}, "linear": {"proj", "out"}},
              calls={"scaled_dot_product_attention": 1, "gelu": 1})  # fmt: skip


class CompilesInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        act = torch.compile(lambda t: F.gelu(t) * 2, backend="eager")  # a new compiled function in every call
        return self.fc(act(x))


def compile_made_in_forward():
    return _w("compile_made_in_forward", CompilesInForward().eval(), description="torch.compile(backend='eager') "
              "of a lambda calling F.gelu, made in every forward (dynamo caches on the lambda's code)",
              modules={"linear": {"fc"}})  # fmt: skip


class TracesInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.child, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        traced = torch.jit.trace(self.child, (x,), check_trace=False)  # traced anew in every call
        return self.head(F.relu(traced(x)))


def jit_trace_in_forward():
    return _w("jit_trace_in_forward", TracesInForward().eval(), description="torch.jit.trace of a child in every "
              "forward (under the tracer, sizes and numel() are tensors), the traced module then called",
              modules={"relu": {""}, "linear": {"child.fc1", "child.fc2", "head"}}, calls={"relu": 1})  # fmt: skip


_LAZY_SOURCE = """
import torch.nn.functional as F
from torch.nn.functional import silu

ACTS = {"gelu": F.gelu}
"""


class ImportsInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        import sweep_lazy_acts  # a lazy import, which no module's globals hold
        from sweep_lazy_acts import ACTS

        return sweep_lazy_acts.silu(ACTS["gelu"](self.fc(x)))


def lazy_import_in_forward():
    folder = tempfile.mkdtemp(prefix="sweep_lazy_")
    Path(folder, "sweep_lazy_acts.py").write_text(_LAZY_SOURCE)
    sys.path.insert(0, folder)

    def remove():
        sys.path.remove(folder)
        sys.modules.pop("sweep_lazy_acts", None)
        shutil.rmtree(folder, ignore_errors=True)

    return _w("lazy_import_in_forward", ImportsInForward().eval(), cleanup=remove, description="a module imported "
              "inside the forward (import statements in its body), whose code holds F.gelu in a dict and silu "
              "imported by name", modules={"gelu": {""}, "silu": {""}}, calls={"gelu": 1, "silu": 1})  # fmt: skip


class ScaledTanh(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, scale):
        return torch.tanh(x) * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class VmappedFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        per_row = torch.func.vmap(lambda row: ScaledTanh.apply(F.elu(row), 2.0))
        return self.fc(per_row(x))


def autograd_function_vmap():
    return _w("autograd_function_vmap", VmappedFunction().eval(), description="an autograd.Function with "
              "setup_context and generate_vmap_rule=True applied under torch.func.vmap after F.elu",
              modules={"elu": {""}, "linear": {"fc"}})  # fmt: skip


class PythonScan(nn.Module):
    def __init__(self, d: int = 8, state: int = 4):
        super().__init__()
        self.in_proj, self.dt = nn.Linear(d, 2 * d), nn.Linear(d, d)
        self.a_log = nn.Parameter(torch.randn(d, state))
        self.b, self.c = nn.Linear(d, state), nn.Linear(d, state)

    def forward(self, x):
        u, gate = self.in_proj(x).chunk(2, dim=-1)
        delta = F.softplus(self.dt(u))
        a = -torch.exp(self.a_log)
        b, c = self.b(u), self.c(u)
        h = torch.zeros(x.shape[0], x.shape[2], a.shape[1])
        outs = []
        for t in range(x.shape[1]):  # the recurrence stepped in Python
            da = torch.exp(delta[:, t, :, None] * a)
            h = da * h + delta[:, t, :, None] * b[:, t, None, :] * u[:, t, :, None]
            outs.append(torch.einsum("bds,bs->bd", h, c[:, t]))
        return torch.stack(outs, 1) * F.silu(gate)


def python_scan_ssm():
    return _w("python_scan_ssm", PythonScan().eval(), samples=[((_x(2, 24, 8),), {})], description="a selective "
              "state-space scan stepped in Python over 24 positions (einsum and exp per step)",
              modules={"softplus": {""}, "silu": {""}, "torch.einsum": {""}}, calls={"softplus": 1, "silu": 1,
              "torch.einsum": 24})  # fmt: skip


class ManyShapes(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        total = x.new_zeros(())
        for n in range(1, 301):  # 300 distinct shapes of one call
            total = total + F.gelu(self.fc(x[:1].expand(n, 16))).sum()
        return total


def many_distinct_signatures():
    return _w("many_distinct_signatures", ManyShapes().eval(), warmup=1, description="one gelu and one Linear called "
              "on 300 distinct shapes in a pass (300 signatures each)", modules={"gelu": {""}},
              calls={"gelu": 300, "linear": 300})  # fmt: skip


def vmap_functional_call_root():
    model = Net().eval()
    params = {**dict(model.named_parameters()), **dict(model.named_buffers())}

    def batched(x):  # a batch of (4, 16) inputs, each through the model by functional_call, in chunks of 2
        return torch.func.vmap(lambda one: torch.func.functional_call(model, params, (one,)), chunk_size=2)(x)

    return Workload("vmap_functional_call_root", batched, [((_x(6, 4, 16),), {})], model, "torch.func.vmap "
                    "(chunk_size=2) of functional_call over the observed model, the profiled function not a module",
                    notes={"modules": {"gelu": {"a", "b"}, "torch.relu": {""}}})  # fmt: skip


UNSEEN7_OP_MECHANISMS = {f.__name__: f for f in (
    zero_size_batch, moe_empty_experts, integer_only, odd_dtypes, strided_views, meta_shape_inference, mkldnn_layout,
    library_replaced_functionals, jit_trace_in_forward, lazy_import_in_forward, compile_made_in_forward,
    autograd_function_vmap, python_scan_ssm, many_distinct_signatures, vmap_functional_call_root,
)}  # fmt: skip
