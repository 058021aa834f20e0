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

import os
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
    """The block with TorchScript compiling the model's code as it is unrecorded: TorchScript compiling Python code
    while recorded (``torch.jit.script`` in a forward, of a function or of a module whose type it has not compiled
    yet; torch's lazy imports that script functions, such as forward-mode AD's first ``make_dual``) read the patched
    names and forwards. Its table of builtins resolves each wrapper of a function (``wrappers``: id(original) ->
    wrapper, None for none) to its original's operator, as it does the original (it cannot compile a wrapper of a
    builtin), and the names in a patched forward are resolved in the original's globals, not the recorder's."""
    from torch import _jit_internal
    from torch.jit import _builtins

    table = _builtins._get_builtin_table()
    added = _wrappers_as_builtins(table, wrappers or {})
    table.update(added)
    resolution = vars(_jit_internal)["createResolutionCallbackFromClosure"]
    _jit_internal.createResolutionCallbackFromClosure = resolved_in_the_original(resolution)
    try:
        yield
    finally:
        for key in added:
            table.pop(key, None)
        _jit_internal.createResolutionCallbackFromClosure = resolution


# The entries the last wrappers got: (those wrappers, the table's length then, {id(wrapper): its original's operator}).
# A plan's wrappers are the process's (recorder/wrappers.py), and torch only adds builtins (at an import that
# registers some): reading the ~1,400 wrappers against the table at each recording cost a small model's profile()
# ~0.4 ms (cpu2), so the entries are made again only for other wrappers or a table that has grown since.
_entries: tuple[dict[int, Any], int, dict[int, Any]] | None = None


def _wrappers_as_builtins(table: dict[int, Any], wrappers: dict[int, Any]) -> dict[int, Any]:
    """``{id(wrapper): operator}`` of each wrapper (``wrappers``: id(original) -> wrapper) whose original is in
    TorchScript's builtin ``table`` and which is not itself there."""
    global _entries
    if _entries is None or _entries[0] is not wrappers or _entries[1] != len(table):
        added = {id(wrapper): table[key] for key, wrapper in wrappers.items() if key in table}
        _entries = (wrappers, len(table), {key: name for key, name in added.items() if key not in table})
    return _entries[2]


def resolved_in_the_original(resolution: Any) -> Any:
    """TorchScript's ``createResolutionCallbackFromClosure`` given the function a wrapper of the recorder wraps."""
    folder = os.path.dirname(__file__) + os.sep

    def resolve(fn: Any) -> Any:
        function = getattr(fn, "__func__", fn)
        while getattr(getattr(function, "__code__", None), "co_filename", "").startswith(folder):
            if not hasattr(function, "__wrapped__"):
                break
            function = getattr(function.__wrapped__, "__func__", function.__wrapped__)
        return resolution(function if function is not getattr(fn, "__func__", fn) else fn)

    return resolve
