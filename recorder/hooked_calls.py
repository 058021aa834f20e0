"""The whole call of a module in the module's scope when it runs more than its forward: its pre-hooks, its forward
and its hooks.

torch runs a module's forward pre-hooks and forward hooks in ``nn.Module._call_impl``, around its forward and
outside the forward's scope, so what they compute was its caller's: the mask product of ``torch.nn.utils.prune``
(a pre-hook), the power iteration of ``spectral_norm``, a hook that rewrites an output. They are the module's work,
as torch's own profiler counts them (its module frames are the calls). While recorded, every scoped module gets an
instance ``_call_impl`` (``nn.Module.__call__`` reads ``self._call_impl``) that reads, at each call as torch's does,
whether the module has hooks (its own or global ones) or a ``forward`` other than the recorder's: then it opens the
module's scope around torch's ``_call_impl``; else it calls the forward itself, in torch's place, so that a module
without hooks pays no frame more than unrecorded. So a hook or forward the model sets at any time (registered,
written straight into the hook dicts, around each call, by ``object.__setattr__``) runs in its module's scope, in
every way of recording (the functions patched or not), with nothing patched on ``nn.Module`` itself. Hooks are not
wrapped one by one: torch's helpers find theirs in the hook dicts by type (``prune.remove``,
``remove_spectral_norm``, ``prune.is_pruned``).
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch import nn

from .calls import INSIDE_CALL, OTHER_THREAD, on_other_thread
from .compiled import dynamo_tracing
from .lazy_results import handed_back
from .scope_gate import NO_SCOPE
from .scope_gate import OPEN as scopes_open

_Scope = torch._C._profiler._RecordFunctionFast
_Tensor = torch.Tensor
_MISSING = object()


def has_forward_hooks(module: nn.Module) -> bool:
    return bool(module._forward_hooks or module._forward_pre_hooks)


def global_forward_hooks() -> bool:
    hooks = sys.modules["torch.nn.modules.module"]
    return bool(hooks._global_forward_hooks or hooks._global_forward_pre_hooks)


def call_in_scope(module: nn.Module, scope_name: str) -> Any:
    """``module``'s ``_call_impl`` (hooks and forward) in the scope ``scope_name`` on the model's threads, at every
    call: for a module whose class answers ``forward`` its own way (instrument._forward_patch_unseen). Its frames
    mark the module's scope (``SCOPE_CODE``, ``module``) for a forward of its class it reaches
    (recorder/class_forwards.py), and a lazy result runs in it (recorder/lazy_results.py)."""
    call, inside_call = module._call_impl, INSIDE_CALL.get

    def call_impl_in_scope(*args: Any, **kwargs: Any) -> Any:
        if dynamo_tracing() or inside_call() is OTHER_THREAD and on_other_thread():  # recorder/threads.py
            return call(*args, **kwargs)
        with _Scope(scope_name) if scopes_open[0] else NO_SCOPE:
            result = call(*args, **kwargs)
        # ``module`` is named so that this frame holds it: class_forwards reads the scope it marks from there
        return result if type(result) is _Tensor or module is None else handed_back(result, scope_name)

    return call_impl_in_scope


SCOPE_CODE = call_in_scope(nn.Module(), "").__code__


def call_in_scope_when_hooked(module: nn.Module, scope_name: str, forward: Any = None) -> Any:
    """``module``'s ``_call_impl`` in the scope ``scope_name`` whenever, at the call, the module has forward or
    backward hooks, global ones are set, torch traces it (``torch.jit.trace``) or its instance ``forward`` is no
    longer the one it has now (the recorder's, put in place before this is made); otherwise its forward, called
    as torch's ``_call_impl`` would call it, or ``forward``: the recorder's of a forward that is its class's, which
    has no instance ``forward``. Torch's checks, in its order, and a look at the instance's ``forward``."""
    in_scope, namespace, tracing = call_in_scope(module, scope_name), vars(module), torch._C._get_tracing_state
    if forward is None:
        forward = namespace.get("forward", _MISSING)
    own = sys.modules["torch.nn.modules.module"]
    global_hooks = (own._global_backward_pre_hooks, own._global_backward_hooks, own._global_forward_hooks,
                    own._global_forward_pre_hooks)  # fmt: skip
    backward_pre, backward, forward_hooks, forward_pre = global_hooks
    instance_forward = namespace.get("forward", _MISSING)

    def call_impl_when_hooked(*args: Any, **kwargs: Any) -> Any:
        if not (
            module._backward_hooks or module._backward_pre_hooks or module._forward_hooks
            or module._forward_pre_hooks or backward_pre or backward or forward_hooks or forward_pre or tracing()
        ) and namespace.get("forward", _MISSING) is instance_forward:  # fmt: skip
            return (module.forward if forward is _MISSING else forward)(*args, **kwargs)
        return in_scope(*args, **kwargs)  # a frame more where hooks run, none on the path without them

    return call_impl_when_hooked
