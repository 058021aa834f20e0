"""A Python module the model imports while recorded (a lazy import at its first call, which a patched warm-up makes:
``warmup_iterations`` of 0 or 1) runs its module-level code with the functions patched, and keeps what it stored of
them (``ACT = F.gelu``, ``from torch.nn.functional import silu``, ``ACTS = {"relu": F.relu}``) past the recording:
the wrappers, left in the program's modules (torch's own included, where the model imports one). After the
recording, the places the scan of stored references reads in such a module (recorder/stored_references.py) get the
originals back, as every other patch does, and so do the keys of its dicts and the members of its sets: registries
keyed by function, of any size (inductor's lowering table, ``register_lowering([torch.full, aten.full])``, imported at
a lazy ``torch.compile`` in a forward, could not lower ``torch.full`` after the recording)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager

from .stored_references import module_sites
from .wrappers import patch_plan


@contextmanager
def late_imports_put_back(calls: str, functions: bool) -> Iterator[None]:
    """The block, then the wrappers that modules imported during it hold replaced by their originals."""
    before = set(sys.modules)
    try:
        yield
    finally:
        if functions:
            _put_back([m for name, m in list(sys.modules.items()) if name not in before], calls)


def _put_back(modules: list, calls: str) -> None:
    modules = [module for module in modules if isinstance(module, types.ModuleType)]
    if not modules:
        return
    plan = patch_plan(calls, recording=True)  # the plan the recording used
    wrappers = {id(wrapper): wrapper for wrapper in plan.wrappers.values()}
    originals = {id(wrapper): plan.originals[key] for key, wrapper in plan.wrappers.items()}
    for module in modules:
        try:
            sites = module_sites(module, wrappers, originals)
            _keys_put_back(module, originals)
        except Exception:  # noqa: BLE001 (a module's own objects): it keeps what it holds, the recording's error goes on
            continue
        for owner, key, original in sites:
            owner[key] = original


def _keys_put_back(module: types.ModuleType, originals: dict) -> None:
    """The dicts and sets among ``module``'s globals keyed by wrappers (``originals``: by their ids) keyed by the
    originals instead, each entry's value kept; an original already there keeps its own."""
    for value in list(vars(module).values()):
        if isinstance(value, dict) and value is not vars(module):
            for key in [key for key in value if id(key) in originals]:
                value.setdefault(originals[id(key)], value.pop(key))
        elif isinstance(value, set):
            for member in [member for member in value if id(member) in originals]:
                value.discard(member)
                value.add(originals[id(member)])
