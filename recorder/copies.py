"""Copies and pickles of a module taken while it is recorded, by the model or a hook of its user
(``copy.deepcopy(self.layer)``, ``torch.save(self)``).

What the recorder set in a module's ``__dict__`` for the module itself (its scoped ``forward``, a compiled module's
scoped entry, a compiled method's) is bound to that module: copied with it, the copy's forward would run the original
module (wrong outputs once the copy's weights change), and pickle cannot write it. While the patches are in place
``nn.Module.__reduce_ex__``, through which copy.copy, copy.deepcopy and pickle take every module apart, gives the
module's state with the model's own values there: whatever ``__getstate__`` the module's class defines (``nn.RNNBase``
has its own; a user's module may) is the one called, and its state is put right afterwards.

The wrapper of a function a module holds by reference (``self.act = F.relu``, ``self.acts = [F.gelu]``) stays in the
state: it is what that name holds while recorded, copies call it as the model does, and it pickles as the name it is
patched under (``PatchPlan``, recorder/wrappers.py), which loads as the function itself. The function itself cannot
be pickled while recorded: pickle writes a function as its name, and checks that the name holds it. So where a
module's state holds a patched function that no stored reference patch replaced (``calls="functional"`` replaces
none; a reference nested deeper than a registry's items), a pickle's state holds its wrapper instead
(``pickled_as_wrappers``), in the containers of the state (dicts, lists, tuples, partials) to a few levels; a copy's
holds the function itself, as the module does.
"""

from __future__ import annotations

import copy
import functools
import sys
from typing import Any

from torch import nn

from .wrapping import wraps

_COPIES = frozenset({copy.copy.__code__, copy.deepcopy.__code__})  # the callers of __reduce_ex__ that copy
_LEVELS = 4  # containers looked into below a module's state: a registry of activations, a config's nested lists
_LARGEST = 1024  # items of a container looked into: a registry, not a vocabulary
_ABSENT = object()


def _own_values(saved: list) -> dict[int, tuple[dict, dict]]:
    """id(a module's __dict__) -> (it, {attribute: (the model's value, the recorder's)}), from ``saved``: patches as
    _Patches saves them, (dict, key, the value before, the value put there)."""
    held: dict[int, tuple[dict, dict]] = {}
    for namespace, key, before, put in saved:
        _, values = held.setdefault(id(namespace), (namespace, {}))
        values[key] = (values[key][0] if key in values else before, put)
    return held


def state_without_patches(module: nn.Module, state: Any, held: dict, missing: Any) -> Any:
    """``state`` (what the module's ``__getstate__`` gave: a dict, or a (dict, slots) pair) with the model's values
    where the recorder's are; ``missing``: _Patches' marker of an attribute the module did not have."""
    if type(state) is tuple and len(state) == 2 and isinstance(state[0], dict):
        return state_without_patches(module, state[0], held, missing), state[1]
    entry = held.get(id(vars(module)))
    if not isinstance(state, dict) or entry is None or entry[0] is not vars(module):
        return state  # a module the recorder set nothing in, or a state of its class's own making
    fixed = state
    for key, (own, put) in entry[1].items():
        if state.get(key, missing) is not put:  # not in the state, or set by the model meanwhile
            continue
        if fixed is state:
            fixed = dict(state)  # never the module's own __dict__, which a __getstate__ may give as it is
        if own is missing:
            del fixed[key]
        else:
            fixed[key] = own
    return fixed


def pickled_as_wrappers(value: Any, wrappers: dict[int, Any], levels: int = _LEVELS) -> Any:
    """``value`` with each function of ``wrappers`` (id(function) -> its wrapper) it holds replaced by its wrapper,
    in new containers where one holds any; ``value`` itself where it holds none."""
    wrapper = wrappers.get(id(value), _ABSENT)
    if wrapper is not _ABSENT and wrapper.__wrapped__ is value:
        return wrapper
    kind = type(value)
    if kind is functools.partial:
        func = pickled_as_wrappers(value.func, wrappers, 0)
        return value if func is value.func else functools.partial(func, *value.args, **value.keywords)
    if levels == 0 or kind not in (dict, list, tuple) or not 0 < len(value) <= _LARGEST:
        return value
    if kind is dict:
        items = {key: pickled_as_wrappers(item, wrappers, levels - 1) for key, item in value.items()}
        return value if all(items[key] is item for key, item in value.items()) else items
    items = [pickled_as_wrappers(item, wrappers, levels - 1) for item in value]
    if all(new is old for new, old in zip(items, value, strict=True)):
        return value
    return items if kind is list else tuple(items)


def copies_without_patches(patches: Any, saved: list, missing: Any, wrappers: dict[int, Any]) -> None:
    """Patch ``nn.Module.__reduce_ex__`` through ``patches`` (a _Patches) so that a copied or pickled module's state
    holds the model's own values for the module attributes ``saved`` lists (patches it saved), and a pickled one's
    the wrappers of the functions ``wrappers`` maps (``pickled_as_wrappers``; module docstring)."""
    held = _own_values(saved)
    own = vars(nn.Module).get("__reduce_ex__", object.__reduce_ex__)

    def __reduce_ex__(self, protocol):  # noqa: N807 (the name copy and pickle look up)
        reduced = own(self, protocol)
        if not isinstance(reduced, tuple) or len(reduced) < 3:
            return reduced
        state = state_without_patches(self, reduced[2], held, missing)
        if wrappers and sys._getframe(1).f_code not in _COPIES:  # pickled: copy and deepcopy call from their frame
            state = pickled_as_wrappers(state, wrappers)
        return reduced if state is reduced[2] else (*reduced[:2], state, *reduced[3:])

    patches.set_attribute(nn.Module, "__reduce_ex__", wraps(__reduce_ex__, own, "__reduce_ex__"))
