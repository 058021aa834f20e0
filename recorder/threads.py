"""Which threads a recording scopes: the thread that runs its passes, and the threads started from one it scopes
while it runs (a worker the model starts in its forward, a thread pool it makes at its first call), in any pass.

Any other thread (a server's, a pool made before the recording) is not part of the model's pass: its calls run the
original functions, unscoped and unsampled, so they never become samples of the pass nor race with their keying
(the sample book is not locked: the per-call path stays one flag test longer, not one lock longer). The wrappers
tell them apart by ``INSIDE_CALL``, which they read anyway: a thread starts in a fresh context, where it holds
``OTHER_THREAD``; a scoped thread holds False outside calls. A thread the model started keeps it for its life, so
a pool the model made in one recording is the model's in the next one too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .calls import INSIDE_CALL, OTHER_THREAD
from .wrapping import wraps

_ABSENT = object()
_installed: list[Any] = []  # the Thread.start wrapper in place, while a block of model_threads() runs


@contextmanager
def model_threads() -> Iterator[None]:
    """The calling thread, and the threads started from a scoped thread while the block runs, are scoped.
    Re-entrant: profile() holds it for all its passes, and ``instrument.instrumented`` (used alone by the
    benchmarks) for the patched ones."""
    token = INSIDE_CALL.set(False)
    outermost = not _installed
    if outermost:
        original = vars(threading.Thread)["start"]
        _installed.append(_start_scoping_the_thread(original))
        threading.Thread.start = _installed[0]
    try:
        yield
    finally:
        if outermost:
            wrapper = _installed.pop()
            if vars(threading.Thread).get("start") is wrapper:  # else rebound meanwhile: the new binding stays
                threading.Thread.start = original
        INSIDE_CALL.reset(token)


def _start_scoping_the_thread(start: Any) -> Any:
    """``Thread.start`` that, called on a scoped thread, makes the new thread scoped from its first instruction:
    its ``run`` is wrapped for that one run (and the thread's own ``run`` attribute, if it had one, put back)."""

    def start_scoped(self, *args, **kwargs):
        if INSIDE_CALL.get() is OTHER_THREAD:
            return start(self, *args, **kwargs)
        own, run = vars(self).get("run", _ABSENT), self.run

        def run_scoped():
            _put_back(self, own)
            INSIDE_CALL.set(False)  # in the new thread's own context, for its life
            return run()

        self.run = run_scoped
        try:
            return start(self, *args, **kwargs)
        except BaseException:
            _put_back(self, own)  # not started (started twice, no thread left): the thread is as it was
            raise

    return wraps(start_scoped, start, "start")


def _put_back(thread: threading.Thread, own: Any) -> None:
    if own is _ABSENT:
        vars(thread).pop("run", None)
    else:
        thread.run = own
