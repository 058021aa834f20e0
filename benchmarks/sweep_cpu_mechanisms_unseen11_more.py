"""Programs for cpu_sweep.py around how models are called that the earlier program files leave out: a subclass's
``__call__`` calling ``super()``, one block shared by two parents, a generator driven with ``send()``,
``mark_dynamic`` and recompiles on a Python int, ``checkpoint_sequential`` and ``save_on_cpu`` with a backward in the
forward, ``MaskedTensor``, ``allow_in_graph``, a wrapper calling its inner model's ``forward`` directly, and
FlexAttention imported by name inside a module compiled by inductor.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import sweep_written_acts
import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, _w, _x
from torch import nn
from torch.nn.attention.flex_attention import flex_attention
from torch.utils.checkpoint import checkpoint_sequential


class ScaledCall(nn.Linear):
    def __call__(self, x, *args, **kwargs):
        return super().__call__(x * 0.5, *args, **kwargs)


class UsesScaledCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.head = ScaledCall(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(F.mish(self.fc(x)))


def call_subclass_super():
    return _w("call_subclass_super", UsesScaledCall().eval(),
              description="an nn.Linear subclass whose __call__ changes the input and calls super().__call__",
              modules={"linear": {"fc", "head"}, "mish": {""}}, calls={"mish": 1, "linear": 2})  # fmt: skip


class Encoder(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return F.silu(self.block(x))


class SharedParents(nn.Module):
    def __init__(self):
        super().__init__()
        block = Mlp()
        self.encoder, self.decoder = Encoder(block), Encoder(block)

    def forward(self, x):
        return self.decoder(self.encoder(x))


def shared_two_parents():
    return _w("shared_two_parents", SharedParents().eval(),
              description="one Mlp instance registered under two different parents, called through each",
              calls={"silu": 2, "gelu": 2})  # fmt: skip


class SendDriven(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.mlp = nn.Linear(16, 16), Mlp()

    def steps(self):
        h = yield
        while True:
            h = yield F.hardtanh(self.mlp(h))

    def forward(self, x):
        stepper = self.steps()
        next(stepper)
        h = self.fc(x)
        for _ in range(3):
            h = stepper.send(h)
        stepper.close()
        return h


def generator_send_forward():
    return _w("generator_send_forward", SendDriven().eval(),
              description="a generator method driven by send() three times in the forward, a child in its body",
              modules={"hardtanh": {""}, "gelu": {"mlp"}}, calls={"hardtanh": 3, "gelu": 3})  # fmt: skip


def compile_mark_dynamic():
    model = torch.compile(Mlp().eval(), backend="inductor")

    def run(x):
        torch._dynamo.mark_dynamic(x, 0)
        return model(x)

    samples = [((_x(4, 16),), {}), ((_x(7, 16),), {}), ((_x(3, 16),), {})]
    return _w("compile_mark_dynamic", model, fn=run, samples=samples,
              description="torch._dynamo.mark_dynamic on the batch of each input to an inductor-compiled module, "
              "three batch sizes")  # fmt: skip


class IntArgument(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x, repeats: int):
        for _ in range(repeats):
            x = self.mlp(x)
        return x


def compile_recompile_int():
    model = torch.compile(IntArgument().eval(), backend="aot_eager")  # fmt: skip
    samples = [((_x(), 1), {}), ((_x(), 2), {}), ((_x(), 3), {})]
    return _w("compile_recompile_int", model, samples=samples,
              description="a compiled module recompiled for each Python int argument (loop count 1, 2, 3)")  # fmt: skip


class CheckpointedSequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(Mlp(), nn.GELU(), Mlp(), nn.Tanh())

    def forward(self, x):
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            out = checkpoint_sequential(self.layers, 2, x, use_reentrant=False)
            (grad,) = torch.autograd.grad(out.sum(), x)
        return out.detach() + grad


def checkpoint_sequential_grad():
    return _w("checkpoint_sequential_grad", CheckpointedSequence().eval(),
              description="checkpoint_sequential (non-reentrant, 2 segments) and an autograd.grad in the forward: "
              "the segments recomputed in the backward",
              modules={"layer_norm": {"layers.0.norm", "layers.2.norm"}})  # fmt: skip


class SavesOnCpu(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            with torch.autograd.graph.save_on_cpu():
                out = F.softplus(self.mlp(x))
            (grad,) = torch.autograd.grad(out.sum(), x)
        return out.detach() * grad


def save_on_cpu_grad():
    return _w("save_on_cpu_grad", SavesOnCpu().eval(),
              description="autograd.graph.save_on_cpu around a forward, autograd.grad after it",
              modules={"softplus": {""}}, calls={"softplus": 1})  # fmt: skip


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(x)
        masked = torch.masked.masked_tensor(h, h > 0)
        return torch.softmax(masked, -1).get_data().nan_to_num(0.0)


def masked_tensor_softmax():
    return _w("masked_tensor_softmax", Masked().eval(),
              description="a torch.masked.MaskedTensor (a __torch_dispatch__ subclass) made of a child's output, "
              "softmax over it", modules={"linear": {"fc"}})  # fmt: skip


@torch._dynamo.allow_in_graph
def _gated(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x) * torch.sigmoid(x)


class AllowedInGraph(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(_gated(self.fc(x)))


def allow_in_graph_compiled():
    return _w("allow_in_graph_compiled", torch.compile(AllowedInGraph().eval(), backend="aot_eager"),
              description="a function marked torch._dynamo.allow_in_graph inside a forward compiled "
              "aot_eager")  # fmt: skip


class Wrapper(nn.Module):
    """A PEFT-like wrapper: unknown attributes come from the model, whose forward it calls directly."""

    def __init__(self, model):
        super().__init__()
        self.base_model = model

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.base_model, name)

    def forward(self, x):
        return F.relu6(self.base_model.forward(x)) + self.head.weight.sum()


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        return F.logsigmoid(self.mlp(x))


def wrapper_calls_forward():
    return _w("wrapper_calls_forward", Wrapper(Inner()).eval(),
              description="a wrapper whose __getattr__ falls back to the wrapped model and which calls its forward "
              "directly (no __call__)", modules={"relu6": {""}, "gelu": {"base_model.mlp"}},
              calls={"relu6": 1, "logsigmoid": 1})  # fmt: skip


def _relative(score, batch, head, q_index, kv_index):
    return score - (q_index - kv_index).abs() * 0.05


class FlexInside(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(32, 96), nn.Linear(32, 32)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 2, 16).permute(2, 0, 3, 1, 4)
        y = flex_attention(q, k, v, score_mod=_relative)
        return self.out(y.transpose(1, 2).reshape(b, t, 32))


def flex_attention_in_compiled_module():
    model = torch.compile(FlexInside().eval(), backend="inductor")
    return _w("flex_attention_in_compiled_module", model, samples=[((_x(2, 16, 32),), {})],
              description="flex_attention imported by name and called in a forward compiled by inductor (dynamo "
              "traces it into the graph)")  # fmt: skip


def _returns_forward(gm, example_inputs):
    return gm.forward  # the graph's own code runs, bound when it compiled


class CFunctionals(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return F.gelu(self.fc(x)) + F.softplus(x)


class CompiledChild(nn.Module):
    def __init__(self, backend):
        super().__init__()
        self.block, self.head = torch.compile(CFunctionals(), backend=backend), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.block(x))


def compile_backend_runs_graph_code():
    return _w("compile_backend_runs_graph_code", CompiledChild(_returns_forward).eval(),
              description="a compiled submodule whose backend returns gm.forward: the graph's C functionals "
              "(torch._C._nn.gelu in its code) are named in the compiled module's scope",
              modules={"gelu": {"block"}, "softplus": {"block"}, "linear": {"block", "head"}},
              calls={"gelu": 1, "softplus": 1, "linear": 2})  # fmt: skip


class GradStep(torch.autograd.Function):
    """A Function whose forward takes a gradient (a solver's step): that backward starts inside its apply's call."""

    @staticmethod
    def forward(ctx, x, hook):
        with torch.enable_grad():
            leaf = x.detach().requires_grad_()
            product = leaf * 2
            product.grad_fn.register_prehook(hook)
            (grad,) = torch.autograd.grad(product.sum(), leaf)
        return grad

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class GradInCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return self.fc(GradStep.apply(x, lambda grads: (F.normalize(grads[0], dim=-1),)))


class GradHost(nn.Module):
    def __init__(self):
        super().__init__()
        self.grad, self.head = GradInCall(), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.grad(x))


def grad_inside_function_call():
    return _w("grad_inside_function_call", GradHost().eval(),
              description="torch.autograd.grad in an autograd Function's forward, its hook calling F.normalize (on "
              "a GPU the backward runs on autograd's device thread, in the call's reopened scopes)",
              modules={"GradStep.apply": {"grad"}, "normalize": {"grad"}}, calls={"normalize": 1})  # fmt: skip


class HelperWrites(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(sweep_written_acts.cached_gelu(self.fc(x)))


def helper_module_global_written():
    return _w("helper_module_global_written", HelperWrites().eval(),
              description="a helper module of the model's code stores F.gelu in its globals at each call (and a "
              "table keyed by F.relu): the originals again after the recording",
              watch=[sweep_written_acts], modules={"gelu": {""}, "silu": {""}})  # fmt: skip


UNSEEN11_MORE_MECHANISMS = {
    f.__name__: f
    for f in (call_subclass_super, shared_two_parents, generator_send_forward, compile_mark_dynamic,
              compile_recompile_int, checkpoint_sequential_grad, save_on_cpu_grad, masked_tensor_softmax,
              allow_in_graph_compiled, wrapper_calls_forward, flex_attention_in_compiled_module,
              compile_backend_runs_graph_code, grad_inside_function_call, helper_module_global_written)
}  # fmt: skip
