"""TorchScript modules in a recording (``torch.jit.script`` or ``torch.jit.trace`` of a module, the model itself or
a submodule of an eager model).

A TorchScript module runs its submodules inside its compiled code, where no Python forward is called and so no scope
opens: the recorder's scope of the TorchScript module the Python code calls holds all their operators. torch.profiler
names, with ``with_modules=True``, the module path inside it that each TorchScript operator ran in (its args' ``Module
Hierarchy``: ``TOP(Outer)::forward.enc(Encoder)::forward.fc(Linear)::forward.``, the instance name and class of each
module whose method ran, TorchScript functions' frames in between as ``::name``). A recording of a model that holds
TorchScript modules records with it, and the manifest maps each such path to its module's dotted name (annotation
``torchscript_modules``, docs/format.md), which the analyzer joins to the scope that holds the operator.

TorchScript writes no frame of a ``ModuleList`` or ``ModuleDict``, which have no forward (it unrolls their loops and
calls their items): an item's path holds the item's name but not the container's (``0(Linear)`` for ``layers.0``). A
path that two modules would have (two lists of the same class) is left out: its operators stay the TorchScript
module's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

_CONTAINERS = ("ModuleList", "ModuleDict")  # what TorchScript writes no frame of


def _kind(module: Any) -> str:
    """The class name TorchScript writes in a path: the name of the class it compiled."""
    return getattr(module, "original_name", None) or type(module).__name__


def torchscript_paths(named_modules: Iterable[tuple[str, torch.nn.Module]]) -> dict[str, dict[str, str]]:
    """{dotted name of a TorchScript module the Python code may call: {path inside it: dotted name of the module}},
    for the outermost TorchScript modules of ``named_modules`` (a model's, parents first); a path is its modules'
    ``name(Class)`` joined by dots, as torch.profiler's Module Hierarchy writes them after ``TOP``."""
    script = torch.jit.ScriptModule
    roots: dict[str, dict[str, str]] = {}
    for name, module in named_modules:
        if not isinstance(module, script) or any(name.startswith(root + ".") or root == "" for root in roots):
            continue
        found: dict[str, list[str]] = {"": [name]}
        _collect(module, "", name, found)
        roots[name] = {path: names[0] for path, names in found.items() if len(names) == 1}
    return roots


def _collect(module: Any, path: str, name: str, found: dict[str, list[str]]) -> None:
    for child_name, child in module.named_children():
        dotted = f"{name}.{child_name}" if name else child_name
        if _kind(child) in _CONTAINERS:
            _collect(child, path, dotted, found)
            continue
        segment = f"{child_name}({_kind(child)})"
        child_path = f"{path}.{segment}" if path else segment
        found.setdefault(child_path, []).append(dotted)
        _collect(child, child_path, dotted, found)


@contextmanager
def scripting_sees_originals(wrappers: dict[int, Any] | None) -> Iterator[None]:
    """The block with TorchScript resolving each wrapper (``wrappers``: id(original) -> wrapper, None for none) to its
    original's operator, as its table of builtins does the original's: TorchScript compiling Python code while
    recorded (``torch.jit.script`` in a forward, torch's lazy imports that script functions, such as forward-mode
    AD's first ``make_dual``) read the patched names, and cannot compile a wrapper of a builtin."""
    if not wrappers:
        yield
        return
    from torch.jit import _builtins

    table = _builtins._get_builtin_table()
    added = {id(wrapper): table[key] for key, wrapper in wrappers.items() if key in table and id(wrapper) not in table}
    table.update(added)
    try:
        yield
    finally:
        for key in added:
            table.pop(key, None)
