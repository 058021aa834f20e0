"""The maps a patch plan's recordings look its wrappers up in, made once with the plan (``PatchPlan``,
recorder/wrappers.py) from its ``originals`` and ``wrappers`` (``id(original)`` -> each) and its ``groups``
(``(owner, {attribute: wrapper})``): each recording with the plan reads them as they are."""

from __future__ import annotations

import types
from typing import Any


def by_wrapper(originals: dict[int, Any], wrappers: dict[int, Any]) -> tuple[dict[int, Any], dict[int, Any]]:
    """``id(wrapper)`` -> the wrapper, and ``id(wrapper)`` -> its original (places left holding one)."""
    return {id(w): w for w in wrappers.values()}, {id(w): originals[i] for i, w in wrappers.items()}


def by_place(groups: list[tuple[Any, dict[str, Any]]]) -> dict[tuple[int, str], Any]:
    """``(id(owner), attribute)`` -> the wrapper the plan puts there, which fx's qualified names read while recorded
    (recorder/graph_code.py; ~0.2 ms a plan for 1,400 attributes)."""
    return {(id(owner), key): value for owner, values in groups for key, value in values.items()}


def _pickled_name(function: Any) -> tuple[Any, Any]:
    return getattr(function, "__module__", None), getattr(function, "__qualname__", None)


def by_pickled_original(
    originals: dict[int, Any], wrappers: dict[int, Any], places: set[tuple[str, str]]
) -> dict[int, Any]:
    """The id of each original pickle writes as a patched attribute's name (``places``: (module, qualified name) of
    each) -> its wrapper, where that is a Python function (recorder/copies.py)."""
    return {
        key: wrappers[key]
        for key, original in originals.items()
        if isinstance(wrappers[key], types.FunctionType) and _pickled_name(original) in places
    }
