"""Whether the wrappers open their scopes: not from when profile() puts its patches in place until the recorded
pass's profiler has started.

torch asserts ("Trying to exit an active record_function_fast context but no guard is set") when a
``_RecordFunctionFast`` scope entered with no profiler running is left with one running. The patches are the
process's, so a thread the model did not start, with a call open at the instant the profiler starts, raised it.
Without a profiler a scope records nothing, so the warm-up passes lose nothing by opening none; the calls are
keyed and marked open exactly as in the recorded pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

OPEN = [True]  # read on the per-call path: a list's item, which the wrappers' closures read without a lookup
NO_SCOPE = nullcontext()  # what a wrapper enters in place of its scope while they are closed


@contextmanager
def closed() -> Iterator[None]:
    """No scope opens for the duration of the block (profile()'s patched passes, until its profiler starts)."""
    OPEN[0] = False
    try:
        yield
    finally:
        OPEN[0] = True


@contextmanager
def opened() -> Iterator[None]:
    """Scopes open for the duration of the block (the recorded pass, its profiler started), then close again."""
    OPEN[0] = True
    try:
        yield
    finally:
        OPEN[0] = False
