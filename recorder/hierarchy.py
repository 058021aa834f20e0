"""The observed hierarchy: every module under the root once, with its dotted name, told apart by identity.

``nn.Module.named_modules()`` skips a module already met by its memo, a set, which compares by ``__hash__`` and
``__eq__``: two distinct children of a class that defines them by value (modules equal when configured alike) are
one for it, and the second would get no scope of its own (its calls named after its parent). The same walk with a
memo that compares by identity lists each distinct module, a shared one still once (at its first path)."""

from __future__ import annotations

from typing import Any

from torch import nn


class _ById:
    """The memo ``named_modules`` keeps, by identity: it only adds and tests membership."""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: set[int] = set()

    def __contains__(self, module: Any) -> bool:
        return id(module) in self._ids

    def add(self, module: Any) -> None:
        self._ids.add(id(module))


def observed_modules(root: nn.Module) -> list[tuple[str, nn.Module]]:
    """``root.named_modules()`` (the same order and names) with duplicates found by identity (module docstring)."""
    return list(root.named_modules(memo=_ById()))
