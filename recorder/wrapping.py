"""What every wrapper the recorder puts in place takes from the function it wraps."""

from __future__ import annotations

import functools
import types
from typing import Any


def wraps(wrapper: Any, function: Any, name: str = "forward") -> Any:
    """``wrapper`` with what ``functools.wraps`` gives it of ``function`` (module, name, qualified name, docstring,
    annotations, ``__wrapped__``; not its ``__dict__``, whose markers tell dynamo how to treat the original): the
    program reads them while it is recorded (``inspect.signature(model.forward)`` follows ``__wrapped__``;
    transformers' ``generate()`` asks it whether the model takes an attention mask, and runs other code when it seems
    not to). ``name`` where ``function`` has none."""
    functools.update_wrapper(wrapper, function, updated=())
    if not isinstance(getattr(function, "__name__", None), str):
        wrapper.__name__ = wrapper.__qualname__ = name
    return wrapper


def bound_like(wrapper: Any, method: types.MethodType) -> types.MethodType:
    """``wrapper``, which takes ``method``'s ``__self__`` first as ``method.__func__`` does, as a method bound to that
    object: what the program asks of a module's forward while it is recorded (``inspect.ismethod``, ``__self__``,
    ``inspect.signature``, through ``__wrapped__``, the function's) is answered as ``method`` answers it."""
    return types.MethodType(wraps(wrapper, method.__func__), method.__self__)
