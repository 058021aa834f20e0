"""dynamo's tables of torch functions (``trace_rules``: which functions go in a graph, which Tensor methods it
allows) are filled by name at their first use, and ``init_process_group`` empties them. Filled while the patches
were in place (a model whose profiled first call compiles, in a process that set up torch.distributed), they held
the recorder's wrappers, not torch's functions: dynamo refused ``torch.layer_norm`` ("Attempted to call function
marked as skipped") in that compile and, for the rest of the process, in every fullgraph compile and higher-order
op (``map``, ``cond``, ``while_loop``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

_TABLES = ("get_torch_obj_rule_map", "get_tensor_method")  # the cached tables that hold torch objects


@contextmanager
def dynamo_tables_of_originals() -> Iterator[None]:
    """Fill dynamo's tables before the block (about 20 ms where they are empty, a lookup where they are not), and
    empty them after it where the block filled them again (an ``init_process_group`` while recorded)."""
    trace_rules = sys.modules.get("torch._dynamo.trace_rules")
    tables = [getattr(trace_rules, name, None) for name in _TABLES] if trace_rules is not None else []
    tables = [table for table in tables if callable(table)]
    filled = [table() for table in tables]
    try:
        yield
    finally:
        if any(table() is not made for table, made in zip(tables, filled, strict=True)):
            trace_rules.clear_lru_cache()  # refilled from torch's own functions at dynamo's next use
