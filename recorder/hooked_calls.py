"""The whole call of a module with forward hooks in the module's scope: its pre-hooks, its forward and its hooks.

torch runs a module's forward pre-hooks and forward hooks in ``nn.Module._call_impl``, around its forward and
outside the forward's scope, so what they compute was its caller's: the mask product of ``torch.nn.utils.prune``
(a pre-hook), the power iteration of ``spectral_norm``, a hook that rewrites an output. They are the module's work,
as torch's own profiler counts them (its module frames are the calls). While recorded, a module that has hooks
when the recording starts, every module while global hooks (``register_module_forward_hook``) are set, gets an
instance ``_call_impl`` that opens its scope around torch's; ``nn.Module.__call__`` reads ``self._call_impl``.
Hooks are not wrapped one by one: torch's helpers find theirs in the hook dicts by type (``prune.remove``,
``remove_spectral_norm``, ``prune.is_pruned``).

A module the model gives hooks or a forward of its own while recorded (a hook registered at its parent's first call,
a global hook, ``child.forward = ...`` as libraries that wrap a forward do) gets that instance ``_call_impl`` then
(``scoped_when_hooked``): what it runs is its work, as it is for one hooked before the recording. Hooks written
straight into a module's hook dicts (``module._forward_hooks[key] = hook``, no registration call to see) are found
between the recording's passes (``profile()`` calls what ``scoped_when_hooked`` returns after each patched warm-up
pass): written in a warm-up pass (at the model's first call), they run in their module's scope in the recorded
pass. Written into the dicts in the recorded pass itself (with no warm-up, or anew at every call), they run in the
caller's scope: seeing them there would cost every module call a look at its hook dicts.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import torch
from torch import nn

from .calls import INSIDE_CALL, OTHER_THREAD, on_other_thread
from .compiled import dynamo_tracing
from .scope_gate import NO_SCOPE
from .scope_gate import OPEN as scopes_open
from .wrapping import wraps

_Scope = torch._C._profiler._RecordFunctionFast


def has_forward_hooks(module: nn.Module) -> bool:
    return bool(module._forward_hooks or module._forward_pre_hooks)


def global_forward_hooks() -> bool:
    hooks = sys.modules["torch.nn.modules.module"]
    return bool(hooks._global_forward_hooks or hooks._global_forward_pre_hooks)


def call_in_scope(module: nn.Module, scope_name: str) -> Any:
    """``module``'s ``_call_impl`` (hooks and forward) in the scope ``scope_name`` on the model's threads."""
    call, inside_call = module._call_impl, INSIDE_CALL.get

    def call_impl_in_scope(*args: Any, **kwargs: Any) -> Any:
        if dynamo_tracing() or inside_call() is OTHER_THREAD and on_other_thread():  # recorder/threads.py
            return call(*args, **kwargs)
        with _Scope(scope_name) if scopes_open[0] else NO_SCOPE:
            return call(*args, **kwargs)

    return call_impl_in_scope


_SCOPED_CALL = next(code for code in call_in_scope.__code__.co_consts if isinstance(code, types.CodeType))
_REGISTERED = ("register_forward_hook", "register_forward_pre_hook")  # nn.Module's
_REGISTERED_GLOBAL = ("register_module_forward_hook", "register_module_forward_pre_hook")  # torch.nn.modules.module's


def scoped_when_hooked(patches: Any, scopes: dict[int, tuple[nn.Module, str]], patch_module: Any) -> Any:
    """For the recording, through ``patches`` (instrument.py's _Patches): a module of ``scopes`` (``id(module)`` ->
    (module, its scope name): the recorded modules that compiled code does not trace) that gets a hook, or an
    instance ``forward`` set through ``nn.Module.__setattr__``, gets its call in its scope (``call_in_scope``,
    installed with ``patch_module(module, "_call_impl", call)``) unless it has it; a global hook gives it to all.
    Returns the function that gives it to the modules hooked meanwhile by writing their (or the global) hook
    dicts, for profile() to call between passes."""

    def give_scope(module: Any) -> None:
        entry = scopes.get(id(module))
        if entry is None or entry[0] is not module:
            return
        if getattr(vars(module).get("_call_impl"), "__code__", None) is not _SCOPED_CALL:
            patch_module(module, "_call_impl", call_in_scope(module, entry[1]))

    def registered(own: Any) -> Any:
        def register_in_scope(self: Any, *args: Any, **kwargs: Any) -> Any:
            handle = own(self, *args, **kwargs)
            give_scope(self)
            return handle

        return wraps(register_in_scope, own, own.__name__)

    def registered_global(own: Any) -> Any:
        def register_for_all(*args: Any, **kwargs: Any) -> Any:
            handle = own(*args, **kwargs)
            for module, _scope_name in list(scopes.values()):
                give_scope(module)
            return handle

        return wraps(register_for_all, own, own.__name__)

    own_setattr = nn.Module.__setattr__

    def __setattr__(self: Any, name: str, value: Any) -> None:  # noqa: N807 (the name Python looks up)
        own_setattr(self, name, value)
        if name == "forward":
            give_scope(self)

    for name in _REGISTERED:
        patches.set_attribute(nn.Module, name, registered(getattr(nn.Module, name)))
    hooks = sys.modules["torch.nn.modules.module"]
    for name in _REGISTERED_GLOBAL:
        patches.set_attribute(hooks, name, registered_global(getattr(hooks, name)))
    patches.set_attribute(nn.Module, "__setattr__", wraps(__setattr__, own_setattr, "__setattr__"))

    def hooked_meanwhile() -> None:
        every_module = global_forward_hooks()
        for module, _scope_name in list(scopes.values()):
            if every_module or has_forward_hooks(module):
                give_scope(module)

    return hooked_meanwhile
