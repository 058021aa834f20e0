"""The interpreter's settings a recording changes while its scopes are in place (instrument.instrumented): Python's
cyclic garbage collector paused, its recursion limit raised by the frames the scopes add."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector is paused while the scopes are in place. The ~1400 wrappers made at
    once (at a process's first recording, and whenever the patched namespaces changed), and the samples kept
    during the pass, would set off full collections of the process's objects (slow with torch loaded) inside
    the measured pass. Paused by its first threshold at 0 (gc.set_threshold: collection off), not by
    ``gc.disable()``, whose switch stays the program's: a model that turns the collector off (or sets its
    thresholds) while recorded finds it so afterwards, as it would unrecorded."""
    thresholds = gc.get_threshold()
    gc.set_threshold(0, *thresholds[1:])
    try:
        yield
    finally:
        if gc.get_threshold()[0] == 0:  # else the model set its own
            gc.set_threshold(*thresholds)


# Frames a recording adds besides those per module level: a folded module's call, calls between functionals, and
# profile()'s own passes (record_pass, the warm-up's lambda...) around the model.
_FRAMES_BESIDES_MODULES = 64
# Per level of the module hierarchy: a module's scoped forward, and its scoped call (recorder/hooked_calls.py).
_FRAMES_PER_LEVEL = 2


@contextmanager
def recursion_room(named_modules: list[tuple[str, nn.Module]]) -> Iterator[None]:
    """Python's recursion limit raised, while the scopes are in place, by the frames they add: a module's scoped
    forward (and call) are frames more per level of the hierarchy, so a model nested about as deep as the limit lets
    it run would raise RecursionError only when recorded. Put back afterwards unless the model changed it meanwhile."""
    levels = max((name.count(".") + 2 if name else 1 for name, _ in named_modules), default=1)
    limit = sys.getrecursionlimit()
    raised = limit + _FRAMES_PER_LEVEL * levels + _FRAMES_BESIDES_MODULES
    sys.setrecursionlimit(raised)
    try:
        yield
    finally:
        if sys.getrecursionlimit() == raised:
            sys.setrecursionlimit(limit)
