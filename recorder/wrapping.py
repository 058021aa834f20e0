"""What every wrapper the recorder puts in place takes from the function it wraps."""

from __future__ import annotations

from typing import Any


def wraps(wrapper: Any, function: Any, name: str = "forward") -> Any:
    """``wrapper`` with ``function``'s name, docstring and ``__wrapped__``: the program reads them while it is
    recorded (``inspect.signature(model.forward)`` follows ``__wrapped__``; transformers' ``generate()`` asks it
    whether the model takes an attention mask, and runs other code when it seems not to)."""
    wrapper.__name__ = getattr(function, "__name__", name)
    wrapper.__qualname__ = getattr(function, "__qualname__", name)
    wrapper.__doc__ = getattr(function, "__doc__", None)
    wrapper.__wrapped__ = function
    return wrapper
