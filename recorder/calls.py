"""Scopes for calls the ``torch.nn.functional`` namespace patch cannot see.

A ``TorchFunctionMode`` sees every torch-level call by object identity, whatever name the caller
stored it under. During a recording it scopes:

- ``torch.nn.functional`` functions reached through a stored reference (``self.act = F.gelu``,
  ``from torch.nn.functional import gelu``), under their functional name, as the namespace patch does;
- torch-level calls made outside any functional call (``torch.addmm``, ``x + y``, ``torch.cat``),
  under a dotted name: ``torch.<name>``, ``Tensor.<name>`` (operators dispatch under their method,
  so ``x + y`` is ``Tensor.add``), ``torch.linalg.<name>``… Functional names never contain a dot, so the
  two cannot collide.

Calls that only read metadata or make views launch nothing and stay unscoped, which keeps the mode's
cost to a dictionary lookup for them.
"""

from __future__ import annotations

import threading
from typing import Any

import torch
from kernelscope.analyzer.rundir import FUNCTION_PREFIX, SAMPLE_SEPARATOR
from torch.overrides import TorchFunctionMode

from .samples import SampleBook

_Scope = torch._C._profiler._RecordFunctionFast

NO_KERNEL_METHODS = frozenset(
    "size dim ndimension numel nelement stride storage_offset is_contiguous data_ptr element_size get_device "
    "is_floating_point is_complex is_signed __len__ __repr__ __format__ __hash__ __iter__ __reversed__ "
    "__contains__ __get__ view view_as transpose permute t unsqueeze squeeze expand expand_as as_strided "
    "detach narrow select unbind split chunk unflatten movedim requires_grad_ dim_order untyped_storage".split()
)
_NAMESPACES = {
    "torch": "torch",
    "torch._C._VariableFunctions": "torch",
    "torch._C._linalg": "torch.linalg",
    "torch._C._fft": "torch.fft",
    "torch._C._special": "torch.special",
    "torch._C._nested": "torch.nested",
    "torch.functional": "torch",
}


class ThreadState(threading.local):
    """Per thread: how many scoped calls are open, and the call a namespace wrapper just handed over."""

    depth = 0
    pending: Any = None


STATE = ThreadState()


def call_name(func: Any) -> str | None:
    """The dotted name of a torch-level call, or None for calls that launch no kernel."""
    name = getattr(func, "__name__", None)
    if name is None or name in NO_KERNEL_METHODS:
        return None
    if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
        return None  # torch internals (torch._C._set_grad_enabled…), not user-level calls
    qualname = getattr(func, "__qualname__", name)
    owner = qualname.partition(".")[0]
    if owner in ("TensorBase", "Tensor"):
        return f"Tensor.{name}"
    module = getattr(func, "__module__", None) or "torch"
    if module not in _NAMESPACES and module.startswith("torch._"):
        return None
    namespace = _NAMESPACES.get(module, module)
    short = namespace.rpartition(".")[2]
    if namespace != "torch" and name.startswith(short + "_"):  # torch.linalg.norm is linalg_norm in C
        name = name[len(short) + 1 :]
    return f"{namespace}.{name}"


class CallScopes(TorchFunctionMode):
    """Scopes (and samples) torch-level calls that no functional scope encloses."""

    def __init__(self, functional: dict[Any, str], book: SampleBook, collect: set[str] | None, torch_calls: bool):
        super().__init__()
        self.functional = functional  # original F function object -> name
        self.book = book
        self.collect = collect
        self.torch_calls = torch_calls
        self.names: dict[Any, str | None] = {}
        self.scope_names: dict[tuple[str, int | None], str] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        state = STATE
        pending = state.pending
        if pending is not None and (func is pending or getattr(func, "__wrapped__", None) is pending):
            # A namespace wrapper already scoped this call. Python functionals hand themselves to
            # handle_torch_function by their module-global name, which is then the wrapper itself:
            # call the original, or the wrapper would run (and count the call) twice.
            state.pending = None
            return pending(*args, **kwargs)
        name = self.functional.get(func)
        if name is None:
            if state.depth or not self.torch_calls:
                return func(*args, **kwargs)
            try:
                name = self.names[func]
            except KeyError:
                name = self.names[func] = call_name(func)
            except TypeError:  # an unhashable callable: name it each time
                name = call_name(func)
            if name is None:
                return func(*args, **kwargs)
        collect = self.collect
        sample_id = self.book.record(name, args, kwargs) if collect is None or name in collect else None
        key = (name, sample_id)
        scope = self.scope_names.get(key)
        if scope is None:
            scope = FUNCTION_PREFIX + name + ("" if sample_id is None else f"{SAMPLE_SEPARATOR}{sample_id}")
            self.scope_names[key] = scope
        state.depth += 1
        try:
            with _Scope(scope):
                return func(*args, **kwargs)
        finally:
            state.depth -= 1


class suspended:
    """Take ``mode`` off this thread's torch-function mode stack for a block (e.g. a compiled region,
    so that dynamo's guards see the stack it compiled under)."""

    def __init__(self, mode: CallScopes | None):
        self.mode = mode
        self.popped = False

    def __enter__(self):
        mode = self.mode
        if (
            mode is not None
            and torch._C._len_torch_function_stack()
            and torch._C._get_function_stack_at(torch._C._len_torch_function_stack() - 1) is mode
        ):
            torch._C._pop_torch_function_stack()
            self.popped = True
        return self

    def __exit__(self, *exc):
        if self.popped:
            torch._C._push_on_torch_function_stack(self.mode)
        return False
