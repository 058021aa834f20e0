"""Which threads a recording scopes: the thread that runs its passes, and the threads started from one it scopes
while it runs (a worker the model starts in its forward, a thread pool it makes at its first call), in any pass.

Any other thread (a server's, a pool made before the recording) is not part of the model's pass: its calls run the
original functions, unscoped and unsampled, so they never become samples of the pass nor race with their keying
(the sample book is not locked: the per-call path stays one flag test longer, not one lock longer). The wrappers
tell them apart by ``INSIDE_CALL``, which they read anyway: a thread starts in a fresh context, where it holds
``OTHER_THREAD``; a scoped thread holds False outside calls, and is among ``calls.SCOPED_THREADS`` for the code it
runs in a context made before the recording (``contextvars.Context.run``), where INSIDE_CALL reads its default. A
thread the model started keeps both for its life, so a pool the model made in one recording is the model's in the
next one too.

Work torch runs for a scoped thread on threads of its own is the model's too: autograd runs a backward's functions
off the CPU, and the Python hooks they call, on its device worker threads (C++ threads, started by no thread of the
program), so a hook of a backward the model runs in its forward (``torch.autograd.grad``) runs there. A scoped
thread holds ``calls.SCOPED_KEY`` among torch's thread-local Python objects, which torch hands, with the rest of
its thread-local state, to the worker that runs a graph task of its backward for that task's time; a worker reads
OTHER_THREAD, and on_other_thread() finds the key there (a check no call on a scoped thread reaches). A backward
run by a thread the recording does not scope carries no key, so its hooks stay unscoped; so do a worker's calls
on threads other than the main one under a torch that cannot take the key away again (``calls.REMOVES_KEY``).

A backward started inside open scopes reopens them on the worker around its nodes' work, in the starting thread's
call state (recorder/backward_scopes.py, which ``model_threads`` puts in place with the thread starters).
"""

from __future__ import annotations

import _thread
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch import autograd

from .backward_scopes import backward_in_open_scopes
from .calls import INSIDE_CALL, OTHER_THREAD, SCOPED_THREADS, on_other_thread, scope_this_thread, unscope_this_thread
from .wrapping import wraps

_ABSENT = object()
_RUN_BACKWARD = "_engine_run_backward"  # what torch.autograd.grad and backward call, from torch.autograd's globals
_installed: list[tuple[Any, str, Any, Any]] = []  # (owner, name, original, wrapper) in place while model_threads() runs


@contextmanager
def model_threads() -> Iterator[None]:
    """The calling thread, and the threads started from a scoped thread while the block runs, are scoped: through
    ``threading.Thread.start`` and through ``_thread.start_new_thread`` (which threading does not call by that name,
    so a thread is scoped once). Re-entrant: profile() holds it for all its passes, and ``instrument.instrumented``
    (used alone by the benchmarks) for the patched ones."""
    token, added = INSIDE_CALL.set(False), _thread.get_ident() not in SCOPED_THREADS
    if added:
        scope_this_thread()
    outermost = not _installed
    if outermost:
        for owner, name, scoping in _STARTERS:
            original = vars(owner)[name]
            _installed.append((owner, name, original, scoping(original)))
            setattr(owner, name, _installed[-1][3])
    try:
        yield
    finally:
        if outermost:
            while _installed:
                owner, name, original, wrapper = _installed.pop()
                if vars(owner).get(name) is wrapper:  # else rebound meanwhile: the new binding stays
                    setattr(owner, name, original)
        if added:
            unscope_this_thread()
        INSIDE_CALL.reset(token)


def _start_scoping_the_thread(start: Any) -> Any:
    """``Thread.start`` that, called on a scoped thread, makes the new thread scoped from its first instruction:
    its ``run`` is wrapped for that one run (and the thread's own ``run`` attribute, if it had one, put back)."""

    def start_scoped(self, *args, **kwargs):
        if INSIDE_CALL.get() is OTHER_THREAD and on_other_thread():
            return start(self, *args, **kwargs)
        own, run = vars(self).get("run", _ABSENT), self.run

        def run_scoped():
            _put_back(self, own)
            return _scoped_for_life(run)

        self.run = run_scoped
        try:
            return start(self, *args, **kwargs)
        except BaseException:
            _put_back(self, own)  # not started (started twice, no thread left): the thread is as it was
            raise

    return wraps(start_scoped, start, "start")


def _start_new_thread_scoping(start_new_thread: Any) -> Any:
    """``_thread.start_new_thread`` that, called on a scoped thread, makes the new thread scoped from its first
    instruction; the arguments go to the original as given, so its checks (args a tuple) are unchanged."""

    def start_new_thread_scoped(function, *arguments):
        if INSIDE_CALL.get() is OTHER_THREAD and on_other_thread() or not callable(function):
            return start_new_thread(function, *arguments)

        def run_scoped(*args, **kwargs):
            return _scoped_for_life(function, *args, **kwargs)

        return start_new_thread(run_scoped, *arguments)

    return wraps(start_new_thread_scoped, start_new_thread, "start_new_thread")


def _scoped_for_life(run: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a new thread's ``run`` as a scoped thread: INSIDE_CALL False in its own context, and its ident among
    SCOPED_THREADS (and the key in torch's thread-local objects), for its life."""
    INSIDE_CALL.set(False)
    scope_this_thread()
    try:
        return run(*args, **kwargs)
    finally:
        unscope_this_thread()


def _put_back(thread: threading.Thread, own: Any) -> None:
    if own is _ABSENT:
        vars(thread).pop("run", None)
    else:
        thread.run = own


# what starts a thread, and the wrapper that scopes the threads it starts from a scoped thread: start_new is
# start_new_thread's old alias (a name of its own, until Python 3.13)
_STARTERS = (
    (threading.Thread, "start", _start_scoping_the_thread),
    (_thread, "start_new_thread", _start_new_thread_scoping),
    *(((_thread, "start_new", _start_new_thread_scoping),) if "start_new" in vars(_thread) else ()),
    # not a thread's start: a backward's, on autograd's device threads, in the scopes open where it starts
    *(((autograd, _RUN_BACKWARD, backward_in_open_scopes),) if _RUN_BACKWARD in vars(autograd) else ()),
)
