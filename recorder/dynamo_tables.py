"""torch's tables of its own functions, filled by name at their first use: dynamo's (``trace_rules``: which functions
go in a graph, which Tensor methods it allows; the functions a ``__torch_function__`` may handle in a graph) and
torch.overrides' (``resolve_name``, ``get_overridable_functions``, ``get_ignored_functions``,
``get_testing_overrides``, the Tensor methods), cached for the process. Filled while the patches were in place (a
model whose profiled first call compiles, or names its calls in a ``__torch_function__`` mode), they held the
recorder's wrappers, not torch's functions: dynamo refused ``torch.layer_norm`` ("Attempted to call function marked
as skipped") in that compile and, for the rest of the process, in every fullgraph compile and higher-order op
(``map``, ``cond``, ``while_loop``); ``resolve_name(F.gelu)`` was None for the rest of the process.
``init_process_group`` empties dynamo's."""

from __future__ import annotations

import operator
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# (module, its cached tables that hold torch objects, in the order they are filled: dynamo's reads torch.overrides')
_TABLES = (
    ("torch.overrides", ("get_ignored_functions", "get_testing_overrides", "get_default_nowrap_functions",
                         "_get_tensor_methods", "_get_overridable_functions")),
    ("torch._dynamo.trace_rules", ("get_torch_obj_rule_map", "get_tensor_method")),
    ("torch._dynamo.variables.torch", ("get_overridable_functions",)),
)  # fmt: skip


@contextmanager
def dynamo_tables_of_originals() -> Iterator[None]:
    """Fill torch's tables before the block (35-70 ms on two busy cores where they are empty, 40 us where they are
    not), and empty those the block filled again after it (an ``init_process_group`` while recorded)."""
    tables = []
    for module_name, names in _TABLES:
        module = sys.modules.get(module_name)
        found = [getattr(module, name, None) for name in names] if module is not None else []
        tables += [table for table in found if callable(table) and hasattr(table, "cache_clear")]
    filled = [table() for table in tables]
    try:
        yield
    finally:
        for table, made in zip(tables, filled, strict=True):
            if table() is not made:  # refilled from torch's own functions at its next use
                table.cache_clear()


@contextmanager
def overrides_tables_naming_wrappers(originals: dict[int, Any], wrappers: dict[int, Any]) -> Iterator[None]:
    """torch.overrides' tables (``resolve_name``, ``get_overridable_functions``, ``is_tensor_method_or_property``,
    ``get_ignored_functions``) answering for each wrapper (``wrappers``: ``id(original)`` -> its wrapper) as for its
    original while the block runs: a forward that asks them about ``F.gelu`` or ``torch.Tensor.add`` (the wrappers
    while recorded) takes the branch it takes unrecorded. The wrappers are held beside the originals (the lists and
    sets are longer while recorded), and taken out again after the block."""
    overrides = sys.modules.get("torch.overrides")
    made = [getattr(overrides, name, None) for name in ("_get_overridable_functions", "_get_tensor_methods",
                                                        "get_ignored_functions")]  # fmt: skip
    if not all(callable(table) for table in made):
        yield
        return
    (by_namespace, index), methods, ignored = (table() for table in made)
    named, added_methods, added_ignored, added = _entries_of_wrappers(
        originals, wrappers, by_namespace, index, methods, ignored
    )
    lengths = [(functions, len(functions)) for functions in by_namespace.values()]
    for (functions, _), wrappers_of_its in zip(lengths, added, strict=True):
        functions.extend(wrappers_of_its)
    index.update(named)
    methods |= added_methods
    ignored |= added_ignored
    try:
        yield
    finally:
        for functions, length in lengths:
            del functions[length:]
        for wrapper in named:
            index.pop(wrapper, None)
        methods -= added_methods
        ignored -= added_ignored


# The entries of the last plan's wrappers, with the objects they were read from and those objects' sizes.
_entries: list[Any] = []


def _entries_of_wrappers(originals, wrappers, by_namespace, index, methods, ignored) -> tuple:
    """What the tables get for ``wrappers`` (overrides_tables_naming_wrappers): the index's names, the Tensor methods,
    the ignored functions and each namespace's list, read once per plan and tables (reading ~1,400 originals against
    them cost each recording ~1 ms), again where any of them is another object or of another size."""
    read_from = (originals, wrappers, index, methods, ignored, *by_namespace.values())
    sizes = tuple(len(part) for part in read_from)
    if _entries and len(_entries[0]) == len(read_from) and all(map(operator.is_, _entries[0], read_from)):
        if _entries[1] == sizes:
            return _entries[2]
    named = {wrappers[key]: index[original] for key, original in originals.items() if _is_in(original, index)}
    added_methods = {wrappers[key] for key, original in originals.items() if _is_in(original, methods)}
    added_ignored = {wrappers[key] for key, original in originals.items() if _is_in(original, ignored)}
    added = [[wrappers[id(f)] for f in functions if id(f) in wrappers] for functions in by_namespace.values()]
    _entries[:] = [read_from, sizes, (named, added_methods, added_ignored, added)]
    return _entries[2]


def _is_in(value: Any, table: Any) -> bool:
    try:
        return value in table
    except TypeError:  # unhashable
        return False
