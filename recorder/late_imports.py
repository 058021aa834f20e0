"""A Python module the model imports while recorded (a lazy import at its first call, which a patched warm-up makes:
``warmup_iterations`` of 0 or 1) runs its module-level code with the functions patched, and keeps what it stored of
them (``ACT = F.gelu``, ``from torch.nn.functional import silu``, ``ACTS = {"relu": F.relu}``) past the recording:
the wrappers, left in the program's modules (torch's own included, where the model imports one). After the
recording, the places the scan of stored references reads in such a module (recorder/stored_references.py) get the
originals back, as every other patch does."""

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
    before = sys.modules.copy()
    try:
        yield
    finally:
        if functions:  # the names new since, found by the dicts' own difference: a loop over 2,000 modules cost 0.4 ms
            _put_back([sys.modules.get(name) for name in sys.modules.keys() - before.keys()], calls)


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
        except Exception:  # noqa: BLE001 (a module's own objects): it keeps what it holds, the recording's error goes on
            continue
        for owner, key, original in sites:
            owner[key] = original
