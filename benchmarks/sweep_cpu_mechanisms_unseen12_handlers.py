"""Programs for cpu_sweep.py around ``__torch_function__`` and ``__torch_dispatch__`` handlers that the earlier
program files leave out: an object that is not a Tensor answering ``__torch_function__``, a Parameter subclass whose
handler knows ``F.linear`` by identity, ``DisableTorchFunction`` around children, a dispatch mode's handler calling
a functional, a checker mode that counts storage reads (as host-sync checkers do), and a precision-debugging mode
that runs the functions it names (``torch.overrides.resolve_name``, whose tables are made at their first use) in
float64.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, _w
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode


class Boxed:
    """Not a Tensor: torch's functions find its __torch_function__ and it unboxes their arguments."""

    def __init__(self, t):
        self.t = t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        def unbox(a):
            return a.t if isinstance(a, Boxed) else a

        return Boxed(func(*map(unbox, args), **{k: unbox(v) for k, v in (kwargs or {}).items()}))


class BoxedModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        boxed = F.layer_norm(F.gelu(Boxed(self.fc(x))), (16,))
        return self.head(torch.add(boxed, 1.0).t)


def non_tensor_torch_function():
    return _w("non_tensor_torch_function", BoxedModel().eval(), description="an object that is not a Tensor, with "
              "a __torch_function__ classmethod, passed to F.gelu, F.layer_norm and torch.add",
              modules={"gelu": {""}, "layer_norm": {""}}, calls={"gelu": 1, "layer_norm": 1})  # fmt: skip


class HalvedParameter(nn.Parameter):
    """A Parameter subclass, as quantization libraries write them, whose handler recognizes F.linear by identity."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunctionSubclass():
            if func is F.linear:
                return F.linear(args[0], args[1] * 0.5, *args[2:], **kwargs)
            return func(*args, **kwargs)


def parameter_subclass_identity():
    model = Mlp().eval()
    model.fc1.weight = HalvedParameter(model.fc1.weight.detach())
    return _w("parameter_subclass_identity", model, description="a Linear's weight a Parameter subclass whose "
              "__torch_function__ halves it when the function is F.linear (checked by identity)",
              modules={"linear": {"fc1", "fc2"}}, calls={"linear": 2})  # fmt: skip


class NoTorchFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        with torch._C.DisableTorchFunctionSubclass():
            h = F.gelu(self.fc1(x))
        with torch._C.DisableTorchFunction():
            h = F.layer_norm(self.fc2(h), (16,))
        return self.head(h)


def disable_torch_function():
    return _w("disable_torch_function", NoTorchFunction().eval(), description="functionals and children under "
              "torch._C.DisableTorchFunctionSubclass and DisableTorchFunction",
              modules={"linear": {"fc1", "fc2", "head"}, "gelu": {""}},
              calls={"gelu": 1, "layer_norm": 1, "linear": 3})  # fmt: skip


class ReluAfterAddmm(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return F.relu(out) if func is torch.ops.aten.addmm.default else out


class DispatchCallsFunctional(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        with ReluAfterAddmm():
            h = self.fc(x)
        return self.head(h)


def functional_inside_dispatch():
    return _w("functional_inside_dispatch", DispatchCallsFunctional().eval(), description="a TorchDispatchMode "
              "entered in the forward whose __torch_dispatch__ calls F.relu on addmm's result (a functional inside "
              "another's aten op)", modules={"linear": {"fc", "head"}})  # fmt: skip


_HOST_READS = (torch.Tensor.untyped_storage, torch.Tensor.data_ptr, torch.Tensor.item, torch.Tensor.tolist)


class CountsHostReads(TorchFunctionMode):
    """Counts what would read a tensor's memory from the host, as checkers of code to be captured in a graph do."""

    def __init__(self):
        super().__init__()
        self.reads = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.reads += func in _HOST_READS
        return func(*args, **(kwargs or {}))


class GuardedBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        with CountsHostReads() as checker:
            out = self.head(F.silu(self.mlp(x)))
        return out, torch.tensor(float(checker.reads))


def mode_counts_host_reads():
    return _w("mode_counts_host_reads", GuardedBlock().eval(), description="a TorchFunctionMode entered in the "
              "forward that counts untyped_storage, data_ptr, item and tolist calls, its count an output",
              modules={"silu": {""}}, calls={"silu": 1, "gelu": 1})  # fmt: skip


_IN_FLOAT64 = {"torch.nn.functional.gelu", "torch.nn.functional.layer_norm", "torch.nn.functional.linear"}


class Float64ByName(TorchFunctionMode):
    """Runs the functions it names in float64, as a precision-debugging mode does."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if torch.overrides.resolve_name(func) not in _IN_FLOAT64:
            return func(*args, **(kwargs or {}))

        def wide(a):
            return a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a

        out = func(*map(wide, args), **{k: wide(v) for k, v in (kwargs or {}).items()})
        return out.float()


class Widened(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        with Float64ByName():
            return self.mlp(x)


def mode_float64_by_name():
    for table in (torch.overrides._get_overridable_functions, torch.overrides.get_ignored_functions,
                  torch.overrides.get_testing_overrides):  # fmt: skip
        table.cache_clear()  # as in a process that never named a function: the first recorded call makes them
    return _w("mode_float64_by_name", Widened().eval(), description="a TorchFunctionMode that runs the functions "
              "torch.overrides.resolve_name names gelu, layer_norm or linear in float64, its tables made at its "
              "first use", modules={"gelu": {"mlp"}}, calls={"gelu": 1})  # fmt: skip


UNSEEN12_HANDLER_MECHANISMS = {
    f.__name__: f
    for f in (non_tensor_torch_function, parameter_subclass_identity, disable_torch_function,
              functional_inside_dispatch, mode_counts_host_reads, mode_float64_by_name)
}  # fmt: skip
