"""Programs for cpu_sweep.py around tensors' mechanisms the earlier program files leave out, each run inside a forward:
Python's protocols on tensors (NumPy arrays of 0-d tensors, ``sorted``, ``max``, ``sum``, ``in``, ``list``, formats,
pickling), shape inference under ``FakeTensorMode``, an autograd Function in ``setup_context`` style that
marks outputs non-differentiable and runs ``once_differentiable``, selective activation checkpointing, saved-tensor
pack hooks, anomaly detection, batched gradients (``is_grads_batched``), ``torch.autograd.functional``'s jacobian
and hvp, a custom op with a CPU kernel of its own and a vmap rule.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import copy
import functools
import math
import operator
import pickle

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import _w
from torch import nn


class Protocols(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        row = F.gelu(self.fc(x))[0]
        scalars = [row[0], row[1], row[2], row[3]]  # 0-d tensors
        numbers = torch.tensor([float(f"{row[0]:.3f}"), math.floor(row[1] * 10), len(row), row[0] in row,
                                memoryview(np.asarray(row)).nbytes])  # fmt: skip
        return (torch.from_numpy(np.array(scalars, dtype=np.float32)), torch.stack(sorted(scalars)), max(scalars),
                sum(scalars), numbers, torch.arange(4)[operator.index(torch.tensor(2))], copy.copy(row),
                pickle.loads(pickle.dumps(row)), torch.stack(list(row)),
                torch.tensor(np.array([row[0], row[1]])))  # fmt: skip


def python_protocols_on_tensors():
    return _w("python_protocols_on_tensors", Protocols().eval(), description="Python's and NumPy's protocols on "
              "tensors in the forward: np.array of 0-d tensors, sorted, max, sum, in, list, format specs, "
              "math.floor, operator.index, copy and pickle", modules={"gelu": {""}})  # fmt: skip


class FakeShapes(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(self, x):
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode(allow_non_fake_inputs=True) as mode:  # the output's shape, computed without compute
            fake = mode.from_tensor(x)
            shape = F.linear(F.gelu(F.linear(fake, self.fc1.weight, self.fc1.bias)), self.fc2.weight).shape
        return x.new_zeros(shape) + self.fc2(F.gelu(self.fc1(x)))


def fake_tensor_shape_inference():
    return _w("fake_tensor_shape_inference", FakeShapes().eval(), description="FakeTensorMode in the forward: "
              "functionals called on fake tensors (real weights) for the output's shape, then for real",
              calls={"gelu": 2, "linear": 4})  # fmt: skip


class SortKeepIndices(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return torch.sort(x, dim=-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        values, indices = output
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        ctx.set_materialize_grads(False)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_values, grad_indices):
        (indices,) = ctx.saved_tensors
        if grad_values is None:
            return None
        return torch.zeros_like(grad_values).scatter_(-1, indices, grad_values)


class SortedGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        with torch.enable_grad():
            h = self.fc(x.detach().requires_grad_())
            values, indices = SortKeepIndices.apply(h)
            (grad,) = torch.autograd.grad(F.softplus(values).sum(), h)
        return values.detach(), indices, grad


def autograd_function_ctx_flags():
    return _w("autograd_function_ctx_flags", SortedGrad().eval(), description="an autograd Function in "
              "setup_context style: mark_non_differentiable indices, set_materialize_grads(False), a "
              "once_differentiable backward, run by autograd.grad in the forward", calls={"softplus": 1})  # fmt: skip


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 16)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


def _save_matmuls(ctx, op, *args, **kwargs):
    from torch.utils.checkpoint import CheckpointPolicy

    return CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.addmm.default else CheckpointPolicy.PREFER_RECOMPUTE


class SelectiveCheckpointed(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

        context = functools.partial(create_selective_checkpoint_contexts, _save_matmuls)
        with torch.enable_grad():
            h = start = x.detach().requires_grad_()
            for block in self.blocks:
                h = checkpoint(block, h, use_reentrant=False, context_fn=context)
            (grad,) = torch.autograd.grad(h.square().mean(), start)
        return h.detach(), grad


def selective_checkpoint_policy():
    # gelu runs in each block's forward and again when the backward recomputes the block
    return _w("selective_checkpoint_policy", SelectiveCheckpointed().eval(), description="non-reentrant "
              "checkpoint with a selective policy (addmm saved, the rest recomputed), its backward in the forward",
              calls={"gelu": 4}, modules={"gelu": {"blocks.0", "blocks.1"}})  # fmt: skip


def _pack_bf16(t):
    return (t.dtype, t.to(torch.bfloat16) if t.is_floating_point() else t)


def _unpack_bf16(packed):
    dtype, t = packed
    return t.to(dtype)


class PackedSaves(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(_pack_bf16, _unpack_bf16):
            out = self.fc2(F.silu(self.fc1(x)))
            grads = torch.autograd.grad(out.square().sum(), [self.fc1.weight, self.fc2.weight])
        return out.detach(), grads


def saved_tensors_pack_hooks():
    return _w("saved_tensors_pack_hooks", PackedSaves().eval(), description="saved_tensors_hooks that pack every "
              "saved tensor to bf16 and unpack it in the backward, run by autograd.grad in the forward",
              modules={"silu": {""}})  # fmt: skip


class Anomalous(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        with torch.enable_grad(), torch.autograd.detect_anomaly(check_nan=True):
            h = x.detach().requires_grad_()
            (grad,) = torch.autograd.grad(F.silu(self.fc(h)).sum(), h)
        return grad


def anomaly_mode_grad():
    return _w("anomaly_mode_grad", Anomalous().eval(), description="autograd.grad under detect_anomaly(check_nan="
              "True) in the forward: every node keeps its forward's Python traceback", calls={"silu": 1})  # fmt: skip


class BatchedGrads(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)

    def forward(self, x):
        with torch.enable_grad():
            h = x.detach().requires_grad_()
            y = F.softplus(self.fc(h))
            basis = torch.eye(8).unsqueeze(1).expand(8, *y.shape)
            (jacobian,) = torch.autograd.grad(y, h, basis, is_grads_batched=True)
        return y.detach(), jacobian


def batched_grads_in_forward():
    return _w("batched_grads_in_forward", BatchedGrads().eval(), description="autograd.grad(is_grads_batched=True): "
              "a Jacobian's rows by one vmapped backward in the forward", calls={"softplus": 1})  # fmt: skip


class FunctionalAPI(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        jacobian = torch.autograd.functional.jacobian(lambda i: F.tanh(self.fc(i)), x[:1], vectorize=True)
        _, hvp = torch.autograd.functional.hvp(lambda i: F.softplus(self.fc(i)).sum(), x[:2], torch.ones_like(x[:2]))
        return jacobian, hvp


def autograd_functional_api():
    return _w("autograd_functional_api", FunctionalAPI().eval(), description="torch.autograd.functional.jacobian "
              "(vectorize=True) and hvp in the forward (they enable grad themselves)",
              modules={"tanh": {""}})  # fmt: skip


_OPS: dict = {}


def _scaled_tanh():
    if "scaled_tanh" not in _OPS:

        @torch.library.custom_op("sweep_unseen14::scaled_tanh", mutates_args=())
        def scaled_tanh(x: torch.Tensor, scale: float) -> torch.Tensor:
            return torch.tanh(x) * scale

        @scaled_tanh.register_kernel("cpu")
        def _(x, scale):  # the CPU kernel of the program's own, through a functional
            return F.tanh(x) * scale

        @scaled_tanh.register_vmap
        def _(info, in_dims, x, scale):
            return scaled_tanh(x.movedim(in_dims[0], 0) if in_dims[0] is not None else x, scale), 0

        _OPS["scaled_tanh"] = scaled_tanh
    return _OPS["scaled_tanh"]


class CustomOpVmapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.__dict__["op"] = _scaled_tanh()

    def forward(self, x):
        h = self.fc(x)
        return torch.vmap(lambda row: self.op(row, 2.0))(h) + self.op(h, 0.5)


def custom_op_cpu_kernel_vmap():
    return _w("custom_op_cpu_kernel_vmap", CustomOpVmapped().eval(), description="a torch.library.custom_op with "
              "a CPU kernel registered by register_kernel (calling F.tanh) and a vmap rule, called directly and "
              "under torch.vmap", modules={"tanh": {""}})  # fmt: skip


UNSEEN14_TENSOR_MECHANISMS = {f.__name__: f for f in (
    python_protocols_on_tensors, fake_tensor_shape_inference, autograd_function_ctx_flags,
    selective_checkpoint_policy, saved_tensors_pack_hooks, anomaly_mode_grad, batched_grads_in_forward,
    autograd_functional_api, custom_op_cpu_kernel_vmap,
)}  # fmt: skip
