"""A Python module the model imports while recorded (a lazy import at its first call, which a patched warm-up makes:
``warmup_iterations`` of 0 or 1) runs its module-level code with the functions patched, and keeps what it stored of
them (``ACT = F.gelu``, ``from torch.nn.functional import silu``, ``ACTS = {"relu": F.relu}``) past the recording:
the wrappers, left in the program's modules (torch's own included, where the model imports one). After the
recording, the places the scan of stored references reads in such a module (recorder/stored_references.py) get the
originals back, as every other patch does, and so do the keys of its dicts and the members of its sets: registries
keyed by function, of any size (inductor's lowering table, ``register_lowering([torch.full, aten.full])``, imported at
a lazy ``torch.compile`` in a forward, could not lower ``torch.full`` after the recording).

The observed modules' own attributes are read the same way: a functional the model stored while recorded
(``self.act = F.gelu`` or a table keyed by ``F.relu`` filled at a first call that a patched warm-up made) is the
original again afterwards, where a table keyed by the wrapper missed at the user's next call. Only their instance
attributes (about 4 ms for a 24-layer decoder), and the globals of the Python modules of the model's code that
the scan reads (a cache keyed or valued by ``F.gelu``, filled at a first call that a patched warm-up made, in the
module of the model's class, of the base class its forward comes from, or of a helper it imports from)."""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .stored_references import code_modules, module_sites, stored_reference_sites
from .wrappers import patch_plan


@contextmanager
def late_imports_put_back(calls: str, functions: bool, observed: list | tuple = ()) -> Iterator[None]:
    """The block, then the wrappers that modules imported during it hold replaced by their originals, and those that
    the ``observed`` modules stored during it (``self.act = F.gelu`` at a first call that a patched warm-up made)."""
    before = sys.modules.copy()
    try:
        yield
    finally:
        if functions:  # the names new since, found by the dicts' own difference: a loop over 2,000 modules cost 0.4 ms
            _put_back([sys.modules.get(name) for name in sys.modules.keys() - before.keys()], calls, list(observed))


def _put_back(modules: list, calls: str, observed: list) -> None:
    modules = list({id(module): module for module in modules if isinstance(module, types.ModuleType)}.values())
    if not modules and not observed:
        return
    wrappers, originals = patch_plan(calls, recording=True).by_wrapper  # the plan the recording used
    for module in modules:
        _put_back_in(functools.partial(module_sites, module, wrappers, originals), [vars(module)], originals)
    if observed:  # what the scan that put the wrappers in reads, the other way round: a global of the model's code too
        namespaces = [vars(module) for module in (*observed, *code_modules(observed))]
        _put_back_in(functools.partial(stored_reference_sites, observed, wrappers, originals), namespaces, originals)


def _put_back_in(scan: Callable[[], list], namespaces: list[dict], originals: dict) -> None:
    """The sites ``scan`` finds given their originals, then the keys of the dicts and sets in ``namespaces``."""
    try:
        sites = scan()
        for owner, key, original in sites:
            owner[key] = original
        for namespace in namespaces:
            _keys_put_back(namespace, originals)
    except Exception:  # noqa: BLE001 (the program's own objects): they keep what they hold, the recording goes on
        return


def _keys_put_back(namespace: dict, originals: dict) -> None:
    """The dicts and sets among ``namespace``'s values keyed by wrappers (``originals``: by their ids) keyed by the
    originals instead, each entry's value and place kept; an original already there keeps its own."""
    for value in list(namespace.values()):
        if isinstance(value, dict) and value is not namespace and any(id(key) in originals for key in value):
            items = list(value.items())
            kept = {key: entry for key, entry in items if id(key) not in originals}  # an original keeps its own
            entries = {originals[id(key)]: entry for key, entry in items if id(key) in originals}
            entries.update(kept)
            value.clear()  # refilled in its order: the user's iteration over the table is unchanged
            for key, _ in items:
                original = originals.get(id(key), key)
                value.setdefault(original, entries[original])
        elif isinstance(value, set):
            for member in [member for member in value if id(member) in originals]:
                value.discard(member)
                value.add(originals[id(member)])
