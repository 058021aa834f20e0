"""The whole call of a module with forward hooks in the module's scope: its pre-hooks, its forward and its hooks.

torch runs a module's forward pre-hooks and forward hooks in ``nn.Module._call_impl``, around its forward and
outside the forward's scope, so what they compute was its caller's: the mask product of ``torch.nn.utils.prune``
(a pre-hook), the power iteration of ``spectral_norm``, a hook that rewrites an output. They are the module's work,
as torch's own profiler counts them (its module frames are the calls). While recorded, a module that has hooks
when the recording starts, every module while global hooks (``register_module_forward_hook``) are set, gets an
instance ``_call_impl`` that opens its scope around torch's; ``nn.Module.__call__`` reads ``self._call_impl``.
Hooks are not wrapped one by one: torch's helpers find theirs in the hook dicts by type (``prune.remove``,
``remove_spectral_norm``, ``prune.is_pruned``).
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch import nn

from .calls import INSIDE_CALL, OTHER_THREAD, on_other_thread
from .compiled import dynamo_tracing
from .scope_gate import NO_SCOPE
from .scope_gate import OPEN as scopes_open

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
