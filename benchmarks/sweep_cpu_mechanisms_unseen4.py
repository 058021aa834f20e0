"""Programs for cpu_sweep.py around what runs between a call and its kernels that the other sweep files leave out:
dispatch-level modes of the user's (FlopCounterMode, a logging TorchDispatchMode, one entered in a forward and left
in another), wrapper tensor subclasses (weights that dequantize in ``__torch_dispatch__``, eager and compiled;
subclasses passed through and returned), and ``__torch_function__`` handlers that recognize functions by identity
(a TorchFunctionMode that swaps functionals, torch's CausalBias as SDPA's mask).

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, Net, _w
from torch import nn

# --- dispatch-level modes of the user's ---------------------------------------------------------------------------


def flop_counter_around():
    from torch.utils.flop_counter import FlopCounterMode

    model = Net().eval()

    def counted(x):
        with FlopCounterMode(display=False):
            return model(x)

    return _w("flop_counter_around", model, fn=counted, description="FlopCounterMode around the forward",
              modules={"gelu": {"a", "b"}}, calls={"gelu": 2})  # fmt: skip


class CountsInside(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        from torch.utils.flop_counter import FlopCounterMode

        counter = FlopCounterMode(display=False)
        with counter:
            y = self.mlp(x)
        return F.silu(self.head(y)) + counter.get_total_flops() * 0


def flop_counter_inside():
    return _w("flop_counter_inside", CountsInside().eval(), description="FlopCounterMode entered inside a forward",
              modules={"gelu": {"mlp"}, "silu": {""}})  # fmt: skip


class Logging(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


def dispatch_mode_around():
    model = Net().eval()

    def logged(x):
        with Logging():
            return model(x)

    return _w("dispatch_mode_around", model, fn=logged, description="a logging TorchDispatchMode around the forward",
              modules={"gelu": {"a", "b"}, "layer_norm": {"a.norm", "b.norm"}})  # fmt: skip


class Opens(nn.Module):
    def __init__(self, holder):
        super().__init__()
        self.fc, self.holder = nn.Linear(16, 16), holder

    def forward(self, x):
        self.holder.append(Logging())
        self.holder[-1].__enter__()
        return F.elu(self.fc(x))


class Closes(nn.Module):
    def __init__(self, holder):
        super().__init__()
        self.fc, self.holder = nn.Linear(16, 16), holder

    def forward(self, x):
        y = F.selu(self.fc(x))
        self.holder.pop().__exit__(None, None, None)
        return y


class SplitMode(nn.Module):
    def __init__(self):
        super().__init__()
        holder = []
        self.opens, self.mid, self.closes = Opens(holder), Mlp(), Closes(holder)

    def forward(self, x):
        return F.softsign(self.closes(self.mid(self.opens(x))))


def dispatch_mode_split():
    model = SplitMode().eval()

    def leave_left_modes():  # the sweep's own stop mid-pass (a hook raising) leaves the model's mode entered
        while model.opens.holder:
            model.opens.holder.pop().__exit__(None, None, None)

    return _w("dispatch_mode_split", model, cleanup=leave_left_modes, description="a TorchDispatchMode entered in "
              "one forward and left in another", modules={"elu": {"opens"}, "gelu": {"mid"}, "selu": {"closes"},
              "softsign": {""}})  # fmt: skip


# --- tensor subclasses ----------------------------------------------------------------------------------------------


class Int8Weight(torch.Tensor):
    """An int8 weight with a per-row scale that dequantizes whenever an op reaches it (torchao's weights do)."""

    @staticmethod
    def __new__(cls, data, scale):
        return torch.Tensor._make_wrapper_subclass(cls, data.shape, dtype=scale.dtype, strides=data.stride())

    def __init__(self, data, scale):
        self.data_int8, self.scale = data, scale

    def __repr__(self):
        return f"Int8Weight({self.shape})"

    def __tensor_flatten__(self):
        return ["data_int8", "scale"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        return Int8Weight(inner["data_int8"], inner["scale"])

    def dequantize(self):
        return self.data_int8.to(self.scale.dtype) * self.scale[:, None]

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.detach.default:  # nn.Parameter(weight) asks for one of its own kind
            return Int8Weight(args[0].data_int8, args[0].scale)
        plain = lambda t: t.dequantize() if isinstance(t, Int8Weight) else t  # noqa: E731
        tree_map = torch.utils._pytree.tree_map
        return func(*tree_map(plain, args), **tree_map(plain, kwargs or {}))


def _quantized(linear: nn.Linear) -> nn.Linear:
    weight = linear.weight.detach()
    scale = weight.abs().amax(1) / 127
    data = torch.round(weight / scale[:, None]).to(torch.int8)
    linear.weight = nn.Parameter(Int8Weight(data, scale), requires_grad=False)
    return linear


def subclass_weights():
    model = Mlp().eval()
    _quantized(model.fc1), _quantized(model.fc2)
    return _w("subclass_weights", model, description="Linears whose weights are wrapper subclasses that dequantize "
              "in __torch_dispatch__", modules={"linear": {"fc1", "fc2"}, "gelu": {""}},
              calls={"linear": 2})  # fmt: skip


def subclass_weights_compiled():
    model = Mlp().eval()
    _quantized(model.fc1), _quantized(model.fc2)
    return _w("subclass_weights_compiled", torch.compile(model, backend="aot_eager"),
              description="wrapper-subclass weights in a compiled model")  # fmt: skip


class Tagged(torch.Tensor):
    pass


class Traced(torch.Tensor):
    calls = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        Traced.calls += 1
        return super().__torch_function__(func, types, args, kwargs or {})


class Subclassed(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        y = self.mlp(x.as_subclass(Traced))
        return F.tanh(y).as_subclass(Tagged)


def subclass_in_and_out():
    return _w("subclass_in_and_out", Subclassed().eval(), description="a __torch_function__ subclass through the "
              "forward, a plain subclass returned", modules={"gelu": {"mlp"}, "tanh": {""}})  # fmt: skip


# --- functions handed to __torch_function__ handlers ------------------------------------------------------------------


class Redirect(torch.overrides.TorchFunctionMode):
    """Swaps calls it recognizes by identity, as modes that route a functional to another implementation do."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is F.gelu:
            return F.silu(args[0])
        if func in (F.softplus, torch.sigmoid):
            return F.relu(args[0])
        return func(*args, **(kwargs or {}))


class Redirected(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        with Redirect():
            return torch.sigmoid(F.softplus(self.mlp(x)))


def function_mode_redirects():
    return _w("function_mode_redirects", Redirected().eval(), description="a TorchFunctionMode that swaps F.gelu, "
              "F.softplus and torch.sigmoid it recognizes by identity for other functionals",
              modules={"silu": {"mlp"}, "relu": {""}}, calls={"gelu": 1, "silu": 1, "relu": 2})  # fmt: skip


class CausalAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(16, 48), nn.Linear(16, 16)

    def forward(self, x):
        from torch.nn.attention.bias import causal_lower_right

        q, k, v = self.qkv(x).view(1, 4, 3, 2, 8).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(4, 4))
        return self.out(y.transpose(1, 2).reshape(4, 16))


def causal_bias_attention():
    return _w("causal_bias_attention", CausalAttention().eval(), description="SDPA with torch's CausalBias as "
              "attn_mask (its __torch_function__ recognizes the call by identity)",
              calls={"scaled_dot_product_attention": 1})  # fmt: skip


UNSEEN4_MECHANISMS = {f.__name__: f for f in (
    flop_counter_around, flop_counter_inside, dispatch_mode_around, dispatch_mode_split, subclass_weights,
    subclass_weights_compiled, subclass_in_and_out, function_mode_redirects, causal_bias_attention,
)}  # fmt: skip
