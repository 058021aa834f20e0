"""Programs for cpu_sweep.py that ask what a forward or a torch function is and branch on the answer: a child's
forward compared with its class's (``__func__``, a reference held at import, ``==``, ``getattr_static``,
``__wrapped__``, its instance dict), a forward that checks it is its class's called through its class,
``__torch_function__`` handlers dispatching on ``func`` (identity, dicts made at import, ``resolve_name``,
``is_tensor_method_or_property``, counts by function, ``super().__torch_function__``, ``func(*args)``),
``_disabled_torch_function_impl``, functionals stored in attributes, their signatures and attributes, a checked child
deep-copied or pickled in a forward. The answers are part of each output, so one that differs while recorded fails
the bit-identity check; each program states what a user expects of its rows (``modules``, ``calls``).
"""

from __future__ import annotations

import copy
import functools
import inspect
import pickle
from collections import Counter

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, _w
from torch import nn
from torch.overrides import TorchFunctionMode, get_overridable_functions, is_tensor_method_or_property, resolve_name


def _flags(*answers) -> torch.Tensor:
    return torch.tensor([float(bool(a)) for a in answers])


class Child(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return F.gelu(self.fc(x))


_CHILD_FORWARD = Child.forward  # held at import, as a library keeps a forward it may replace


class AsksItsChild(nn.Module):
    """Runs its child only where its forward is still the class's; else a branch of its own."""

    def __init__(self, ask):
        super().__init__()
        self.child, self.head, self.ask = Child(), nn.Linear(16, 4), ask

    def forward(self, x):
        answers = self.ask(self.child)
        h = self.child(x) if all(answers) else F.softsign(x)
        return self.head(h), _flags(*answers)


def _asks_identity(child):
    return (child.forward.__func__ is Child.forward, type(child).forward is _CHILD_FORWARD,
            child.forward == _CHILD_FORWARD.__get__(child), inspect.getattr_static(child, "forward") is _CHILD_FORWARD,
            "forward" not in vars(child), child.forward.__self__ is child)  # fmt: skip


def _asks_introspection(child):
    forward = type(child).forward
    return (forward.__qualname__ == "Child.forward", not hasattr(forward, "__wrapped__"),
            inspect.unwrap(forward) is _CHILD_FORWARD, forward.__code__.co_name == "forward",
            str(inspect.signature(child.forward)) == "(x)", forward.__module__ == __name__)  # fmt: skip


def forward_identity_checks():
    return _w("forward_identity_checks", AsksItsChild(_asks_identity).eval(), description="a parent runs its child "
              "only where child.forward.__func__ is Child.forward, type(child).forward is a reference held at import, "
              "the bound forwards are equal, getattr_static finds the class's and no instance forward is set",
              modules={"gelu": {"child"}, "linear": {"child.fc", "head"}}, calls={"gelu": 1})  # fmt: skip


def forward_introspection_checks():
    return _w("forward_introspection_checks", AsksItsChild(_asks_introspection).eval(), description="a parent runs its "
              "child only where the class's forward has its qualname, no __wrapped__, unwraps to itself, its code's "
              "name, signature and module", modules={"gelu": {"child"}}, calls={"gelu": 1})  # fmt: skip


def _while_its_classes(forward):
    """A forward that acts only while it is its class's, as transformers' checkpointing layers tell it."""

    @functools.wraps(forward)
    def outermost(self, x):
        return F.softsign(forward(self, x)) if type(self).forward is outermost else forward(self, x)

    return outermost


class Checked(Child):
    forward = _while_its_classes(Child.forward)


class CallsThroughTheClass(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer, self.head = Checked(), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(Checked.forward(self.layer, x) + self.layer.forward(x) + self.layer(x))


def self_checking_forward_through_class():
    return _w("self_checking_forward_through_class", CallsThroughTheClass().eval(), description="a layer whose "
              "forward acts only while type(self).forward is itself, called through its class, its bound forward "
              "and __call__", modules={"softsign": {"layer"}, "gelu": {"layer"}}, calls={"softsign": 3})  # fmt: skip


class Wrapped(Child):
    forward = functools.wraps(Child.forward)(lambda self, x: F.silu(Child.forward(self, x)))


class ReadsWrapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.child, self.head = Wrapped(), nn.Linear(16, 4)

    def forward(self, x):
        wrapped = getattr(type(self.child).forward, "__wrapped__", None) is _CHILD_FORWARD
        return self.head(self.child(x) if wrapped else x), _flags(wrapped)


def functools_wraps_forward():
    return _w("functools_wraps_forward", ReadsWrapped().eval(), description="a class forward made by "
              "functools.wraps over its base's, whose __wrapped__ the parent compares with the base's forward",
              modules={"silu": {"child"}, "gelu": {"child"}}, calls={"silu": 1})  # fmt: skip


_FORWARDS = {Child: Child.forward}  # a registry of forwards by class, made at import


class RegistryCaller(nn.Module):
    def __init__(self):
        super().__init__()
        self.child, self.head = Child(), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(_FORWARDS[type(self.child)](self.child, x))


def forward_from_registry():
    return _w("forward_from_registry", RegistryCaller().eval(), description="a child's class forward looked up in a "
              "dict made at import and called with the child", modules={"gelu": {"child"}})  # fmt: skip


_SCALES = {torch.add: 2.0, torch.Tensor.add: 3.0, torch.Tensor.mul: 0.5, F.gelu: 1.5, F.layer_norm: 0.25,
           F.linear: 1.0}  # fmt: skip


class ScalesByFunction(TorchFunctionMode):
    """Scales the results of the functions its import-time dict names, and counts calls keyed by function object."""

    def __init__(self):
        super().__init__()
        self.by_func = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.by_func[func] += 1
        out = func(*args, **(kwargs or {}))
        scale = _SCALES.get(func)
        return out * scale if scale is not None and isinstance(out, torch.Tensor) else out

    @property
    def counts(self):
        return Counter({resolve_name(func): n for func, n in self.by_func.items()})


class UnderAMode(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mlp, self.head, self.mode = Mlp(), nn.Linear(16, 4), mode

    def forward(self, x):
        with self.mode() as mode:
            h = torch.add(self.mlp(x), 1.0).add(1.0).mul(2.0) + x * 2
        names = sorted((name or "?", n) for name, n in getattr(mode, "counts", {}).items())
        return self.head(h), torch.tensor([float(n) for _, n in names]), _flags(*(name != "?" for name, _ in names))


def mode_dispatch_by_identity():
    return _w("mode_dispatch_by_identity", UnderAMode(ScalesByFunction).eval(), description="a TorchFunctionMode that "
              "scales results by a dict keyed by torch functions made at import (torch.add, Tensor.add, Tensor.mul, "
              "F.gelu, F.layer_norm, F.linear) and counts calls in a Counter keyed by func, named by resolve_name",
              modules={"gelu": {"mlp"}}, calls={"gelu": 1, "Tensor.mul": 1})  # fmt: skip


class MethodsOnly(TorchFunctionMode):  # tells Tensor methods and properties from the rest, as tracing helpers do
    def __init__(self):
        super().__init__()
        self.counts = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.counts["method" if is_tensor_method_or_property(func) else "function"] += 1
        self.counts["listed" if func in get_overridable_functions()[torch.Tensor] else "unlisted"] += 1
        return func(*args, **(kwargs or {}))


def mode_tensor_methods():
    return _w("mode_tensor_methods", UnderAMode(MethodsOnly).eval(), description="a TorchFunctionMode counting "
              "is_tensor_method_or_property(func) and func in get_overridable_functions()[torch.Tensor]",
              calls={"gelu": 1})  # fmt: skip


class Tagged(torch.Tensor):
    """A subclass whose handler knows functions by identity and halves what Tensor.add and F.gelu return."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        if func is torch.Tensor.add or func is F.gelu or resolve_name(func) == "torch.Tensor.mul":
            with torch._C.DisableTorchFunctionSubclass():
                return out * 0.5
        return out


class CallsBack(torch.Tensor):  # its handler calls func back on plain tensors, counting them by resolve_name
    seen: Counter = Counter()

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen[resolve_name(func)] += 1
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class OnASubclass(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.fc, self.head, self.kind = nn.Linear(16, 16), nn.Linear(16, 4), kind

    def forward(self, x):
        t = x.as_subclass(self.kind)
        h = F.gelu(self.fc(t)).add(1.0).mul(3.0) + t
        out = self.head(torch.Tensor.as_subclass(h, torch.Tensor))
        seen = getattr(self.kind, "seen", {})
        return out, _flags(None not in seen, seen.get("torch.Tensor.add", 0) > 0)


def subclass_dispatch_by_identity():
    return _w("subclass_dispatch_by_identity", OnASubclass(Tagged).eval(), description="a tensor subclass whose "
              "handler (through super().__torch_function__) halves Tensor.add, F.gelu and (by resolve_name) "
              "Tensor.mul", calls={"gelu": 1, "Tensor.mul": 1})  # fmt: skip


def subclass_calls_func_back():
    return _w("subclass_calls_func_back", OnASubclass(CallsBack).eval(), description="a tensor subclass whose "
              "handler counts resolve_name(func) and calls func(*args) back under DisableTorchFunctionSubclass",
              calls={"gelu": 1})  # fmt: skip


NoHandler = type("NoHandler", (torch.Tensor,), {"__torch_function__": torch._C._disabled_torch_function_impl})


def disabled_torch_function_impl():
    return _w("disabled_torch_function_impl", OnASubclass(NoHandler).eval(), description="a tensor subclass with "
              "__torch_function__ = torch._C._disabled_torch_function_impl (its results plain tensors)",
              calls={"gelu": 1})  # fmt: skip


class TablesInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        table = get_overridable_functions()
        answers = (F.gelu in table[F], torch.add in table[torch], torch.Tensor.add in table[torch.Tensor],
                   resolve_name(F.layer_norm) == "torch.nn.functional.layer_norm",
                   is_tensor_method_or_property(torch.Tensor.mul),
                   resolve_name(torch.Tensor.add) is not None)  # fmt: skip
        return self.mlp(x) if all(answers) else x, _flags(*answers)


def overrides_tables_in_forward():
    return _w("overrides_tables_in_forward", TablesInForward().eval(), description="get_overridable_functions, "
              "resolve_name and is_tensor_method_or_property asked about F.gelu, torch.add, Tensor.add, F.layer_norm "
              "and Tensor.mul in a forward", modules={"gelu": {"mlp"}}, calls={"gelu": 1})  # fmt: skip


_GELU = F.gelu  # held at import
_NAMES = {F.gelu: "gelu", F.silu: "silu", torch.tanh: "tanh"}  # keyed by functions, made at import


class StoredFunctions(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.act, self.acts = nn.Linear(16, 16), F.gelu, [F.silu, torch.tanh]

    def forward(self, x):
        answers = (self.act is F.gelu, self.act is _GELU, _NAMES.get(self.act) == "gelu", self.acts[0] is F.silu,
                   _NAMES.get(self.acts[1]) == "tanh", self.act == F.gelu)  # fmt: skip
        h = self.act(self.fc(x)) if all(answers) else x
        for act in self.acts:
            h = act(h) if _NAMES.get(act) else h
        return h, _flags(*answers)


def stored_function_identity():
    return _w("stored_function_identity", StoredFunctions().eval(), description="functionals stored at __init__ "
              "(self.act = F.gelu, a list) compared with F.gelu, a reference held at import and a dict keyed by "
              "functions made at import", modules={"gelu": {""}, "silu": {""}},
              calls={"gelu": 1, "silu": 1, "torch.tanh": 1})  # fmt: skip


class ReadsFunctionals(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        answers = (F.gelu.__name__ == "gelu", F.layer_norm.__module__ == "torch.nn.functional",
                   F.relu.__qualname__ == "relu", not hasattr(F.relu, "__wrapped__"),
                   not hasattr(F.layer_norm, "__wrapped__"), F.layer_norm.__doc__ == _LAYER_NORM_DOC,
                   torch.add.__name__ == "add", torch.Tensor.add.__name__ == "add",
                   inspect.isbuiltin(torch.add), inspect.isfunction(F.relu),
                   F.relu.__code__.co_name == "relu")  # fmt: skip
        return self.mlp(x) if all(answers) else x, _flags(*answers)


_LAYER_NORM_DOC = F.layer_norm.__doc__


def functional_attributes_in_forward():
    return _w("functional_attributes_in_forward", ReadsFunctionals().eval(), description="__name__, __module__, "
              "__qualname__, __doc__, __wrapped__ and __code__ of functionals and torch functions, isbuiltin and "
              "isfunction, read in a forward", modules={"gelu": {"mlp"}}, calls={"gelu": 1})  # fmt: skip


class ReadsSignatures(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        norm = inspect.signature(F.layer_norm)
        dropout = inspect.signature(F.dropout)
        answers = (list(norm.parameters)[:3] == ["input", "normalized_shape", "weight"],
                   "eps" in norm.parameters, dropout.parameters["p"].default == 0.5,
                   "inplace" in inspect.signature(F.relu).parameters)  # fmt: skip
        return self.mlp(x) if all(answers) else x, _flags(*answers)


def signatures_in_forward():
    return _w("signatures_in_forward", ReadsSignatures().eval(), description="inspect.signature of F.layer_norm, "
              "F.dropout and F.relu in a forward, its parameters branched on", modules={"gelu": {"mlp"}},
              calls={"gelu": 1})  # fmt: skip


class CopiesItsChild(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.child, self.head, self.how = Checked(), nn.Linear(16, 4), how

    def forward(self, x):
        twin = self.how(self.child)
        same = type(twin).forward is type(self.child).forward and "forward" not in vars(twin)
        return self.head(twin(x) + self.child(x)), _flags(same, twin.forward.__func__ is Checked.forward)


def deepcopy_checked_child_in_forward():
    return _w("deepcopy_checked_child_in_forward", CopiesItsChild(copy.deepcopy).eval(), description="a child whose "
              "forward checks it is its class's, deep-copied in the forward and run beside itself",
              calls={"softsign": 2})  # fmt: skip


def pickle_checked_child_in_forward():
    return _w("pickle_checked_child_in_forward", CopiesItsChild(lambda m: pickle.loads(pickle.dumps(m))).eval(),
              description="a child whose forward checks it is its class's, pickled and loaded in the forward and run "
              "beside itself", calls={"softsign": 2})  # fmt: skip


class ChecksItsForwardIsSet(nn.Module):  # asks, as accelerate's hooks do, whether a forward was set on its children
    def __init__(self):
        super().__init__()
        self.mlp, self.lin, self.head = Mlp(), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        answers = ("forward" not in self.mlp.__dict__, "forward" not in self.lin.__dict__,
                   self.lin.forward.__func__ is nn.Linear.forward, type(self.mlp).forward is Mlp.forward,
                   not hasattr(self.lin, "_old_forward"))  # fmt: skip
        return self.head(self.lin(self.mlp(x))), _flags(*answers)


def forward_set_checks():
    return _w("forward_set_checks", ChecksItsForwardIsSet().eval(), description="a parent asking whether forward is "
              "in its children's __dict__ and whether nn.Linear's bound forward is nn.Linear.forward",
              modules={"linear": {"mlp.fc1", "mlp.fc2", "lin", "head"}})  # fmt: skip


UNSEEN13_IDENTITY_MECHANISMS = {
    f.__name__: f
    for f in (forward_identity_checks, forward_introspection_checks, self_checking_forward_through_class,
              functools_wraps_forward, forward_from_registry, mode_dispatch_by_identity, mode_tensor_methods,
              subclass_dispatch_by_identity, subclass_calls_func_back, disabled_torch_function_impl,
              overrides_tables_in_forward, stored_function_identity, functional_attributes_in_forward,
              signatures_in_forward, deepcopy_checked_child_in_forward, pickle_checked_child_in_forward,
              forward_set_checks)
}  # fmt: skip
