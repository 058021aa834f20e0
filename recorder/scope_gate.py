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
from contextlib import contextmanager

OPEN = [True]  # a list, so that every module importing it reads the one flag (on the per-call path)


class _NoScope:
    """What a wrapper enters in place of its scope while they are closed. Not contextlib's nullcontext: a wrapper
    called inside a compiled frame runs this under compiled_code_kept's stance, which refuses code dynamo has not
    seen, and only the recorder's own code is marked for dynamo to run as it is (recorder/compiled.py)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        return None


NO_SCOPE = _NoScope()


@contextmanager
def set_open(is_open: bool) -> Iterator[None]:
    """Scopes open (or not) for the duration of the block, then as before it: closed for profile()'s patched
    passes, open inside them for its recorded pass, once its profiler has started."""
    before, OPEN[0] = OPEN[0], is_open
    try:
        yield
    finally:
        OPEN[0] = before
