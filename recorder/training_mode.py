"""The warning for a model recorded in training mode: profile() records an inference pass, and a model left in
training mode (built and never given ``.eval()``) runs its dropout, batch norm and attention as in training."""

from __future__ import annotations

import inspect
import warnings

from torch import nn


def warn_if_training(module: nn.Module, stacklevel: int) -> None:
    """Warn when a module of ``module``'s hierarchy is in training mode and its forward reads ``self.training``
    (the mode changes what it computes: dropout, batch norm, attention's fast path, the user's own checks)."""
    changed = sorted({type(m).__name__ for m in module.modules() if _in_training(m) and _forward_reads_training(m)})
    if not changed:
        return
    named = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    warnings.warn(
        f"kernelscope: the model is in training mode: its modules {named} run as in training, not as in inference; "
        "call model.eval() before recording",
        RuntimeWarning,
        stacklevel=stacklevel + 1,
    )


def _in_training(module: nn.Module) -> bool:
    """``module.training``, where it has one: a frozen TorchScript module has none, and a hostile module's
    attribute code may raise; neither is the warning's business."""
    try:
        return getattr(module, "training", False) is True
    except Exception:  # noqa: BLE001 - the model's own attribute code
        return False


def _forward_reads_training(module: nn.Module) -> bool:
    try:
        forward = inspect.unwrap(getattr(module.forward, "__func__", module.forward))
    except Exception:  # noqa: BLE001 - a forward that is a property needing the parent's state, a hostile getattr
        return False
    code = getattr(forward, "__code__", None)
    return code is not None and "training" in code.co_names
