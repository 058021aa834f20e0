"""The warnings profile() gives about how it was called, as a newcomer gets it wrong: a model left in training mode
(built and never given ``.eval()``: dropout, batch norm and attention run as in training), and ``function_names``
that named none of the calls the pass made (a module's class name, ``Linear``, for its call ``linear``)."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Iterable

from torch import nn


def warn_if_training(module: nn.Module, stacklevel: int) -> None:
    """Warn when a module of ``module``'s hierarchy is in training mode and its forward reads ``self.training``
    (the mode changes what it computes: dropout, batch norm, attention's fast path, the user's own checks)."""
    changed = sorted({type(m).__name__ for m in module.modules() if _in_training(m) and _forward_reads_training(m)})
    if not changed:
        return
    named = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    message = f"kernelscope: the model is in training mode: its modules {named} run as in training, not as in inference"
    warnings.warn(f"{message}; call model.eval() before recording", RuntimeWarning, stacklevel=stacklevel + 1)


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


def warn_if_no_call_named(function_names: set[str] | None, called: Iterable, stacklevel: int) -> None:
    """Warn when ``function_names`` names calls and none of them is among the pass's calls: no input was kept. One
    name among others that the model does not call (a broad set reused across models) is no mistake to warn of."""
    made = sorted({name for name in called if isinstance(name, str)})
    if not function_names or not made or function_names & set(made):
        return
    shown = ", ".join(made[:8]) + (f", … ({len(made)} in all)" if len(made) > 8 else "")
    named = f"kernelscope: function_names {sorted(function_names)}"
    message = f"{named} named none of the calls the recorded pass made ({shown})"
    advice = "no inputs were kept; name them as function_name shows them"
    warnings.warn(f"{message}: {advice}", RuntimeWarning, stacklevel=stacklevel + 1)
