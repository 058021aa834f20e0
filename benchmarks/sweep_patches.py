"""What a recording may leave patched, for cpu_sweep.py's and first_call.py's checks: a snapshot of every
``__dict__`` a recording may patch for a workload, and what differs from it afterwards."""

from __future__ import annotations

import _thread
import sys
import threading
import types
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from kernelscope.recorder.calls import aoti_compiled_model
from torch import nn

ATTENTION_MODULES = ("torch.nn.attention.flex_attention", "torch.nn.attention.varlen")  # patched where torch has them


def _owners(w) -> list:
    """Everything whose ``__dict__`` a recording may patch, for this workload."""
    owners = [torch, F, torch.Tensor, torch._C.TensorBase, torch._C._nn, torch.linalg, torch.fft, torch.special,
              torch.sparse, torch.autograd.function.Function, nn.Module, threading.Thread, _thread, torch.autograd,
              torch.nn.modules.module, torch._jit_internal]  # fmt: skip
    if torch.distributed.is_available():
        owners.append(torch.distributed)
    owners += [sys.modules[name] for name in ATTENTION_MODULES if name in sys.modules]
    if aoti_compiled_model() is not None:  # a program that loaded an AOTInductor package
        owners.append(aoti_compiled_model())
    modules = list(w.module.modules()) + list(w.notes.get("watch", []))
    owners += modules
    for m in modules:
        python_module = sys.modules.get(type(m).__module__)
        if python_module is not None:
            owners.append(python_module)
        owners += [kind for kind in type(m).__mro__ if kind is not object]  # class-level forwards are patched too
    seen, unique = set(), []
    for owner in owners:
        if id(owner) not in seen:
            seen.add(id(owner))
            unique.append(owner)
    return unique


def snapshot(w) -> list:
    modules = (set(sys.modules), [m for m in w.notes.get("watch", []) if isinstance(m, types.ModuleType)])
    return [(owner, dict(vars(owner))) for owner in _owners(w)] + [("recursionlimit", sys.getrecursionlimit()),
                                                                   ("modules", modules)]  # fmt: skip


_RECORDER = str(Path(sys.modules["kernelscope.recorder"].__file__).parent)  # the wrappers' code is there


def _wrappers_in_modules_since(before: set, watched: list) -> list[str]:
    """The globals (and their dicts' keys and values) of the modules imported since ``before`` and of the ``watched``
    ones that hold a wrapper of the recorder's."""
    found = []
    for module in [sys.modules.get(name) for name in set(sys.modules) - before] + watched:
        for key, value in list(getattr(module, "__dict__", {}).items()):
            if any(map(_is_wrapper, [value, *value.keys(), *value.values()] if type(value) is dict else [value])):
                found.append(f"{getattr(module, '__name__', module)}.{key} holds a recorder wrapper")
    return found


def _is_wrapper(value) -> bool:
    return str(getattr(getattr(value, "__code__", None), "co_filename", "")).startswith(_RECORDER)


def changes(before: list, recorder_only: bool = False) -> list[str]:
    """What differs from ``before`` now (attributes that are Python modules, imported meanwhile, left aside);
    ``recorder_only``: only wrappers of the recorder's left and attributes removed (torch's own first-use
    installs, dynamo's patches of nn.Module, left aside)."""
    found = []
    for owner, attributes in before:
        if owner == "recursionlimit":
            limit = sys.getrecursionlimit()
            # inductor's compile_fx raises it to 2000 as it compiles, in a never-profiled first call as well
            by_inductor = limit == max(attributes, 2000) and "torch._inductor.compile_fx" in sys.modules
            if limit != attributes and not (recorder_only and by_inductor):
                found.append(f"recursion limit {attributes} -> {limit}")
            continue
        if owner == "modules":
            found += _wrappers_in_modules_since(*attributes)
            continue
        now = vars(owner)
        name = getattr(owner, "__name__", type(owner).__name__)
        for key in attributes.keys() | now.keys():
            old, new = attributes.get(key, "<absent>"), now.get(key, "<absent>")
            if old is new or isinstance(new, types.ModuleType) and old == "<absent>":
                continue
            if not (callable(old) or callable(new)) or isinstance(new, (torch.Tensor, nn.Module)):
                continue  # the model's own state (a counter, a cache, a submodule it swaps): no patch
            if recorder_only and not (_is_wrapper(new) or new == "<absent>"):
                continue
            if key == "__slotnames__":  # copyreg's cache, set by the first copy or pickle of the class's objects
                continue
            found.append(f"{name}.{key}: {str(old)[:60]} -> {str(new)[:60]}")
    return found[:10]
