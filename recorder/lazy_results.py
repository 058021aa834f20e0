"""A forward whose result runs its code later: a generator, a coroutine (``async def forward``), an async generator, a
``map`` or ``filter`` object, or one of those held one level down in a tuple, named tuple, list or dict it returns.

Its code runs when the caller iterates or awaits it, after the forward's scope has closed, so its calls would land in
the caller's module. The result is handed back as one of the same kind that runs each resume of the original in the
module's scope (``resumed_in_scope``), with the call state the forward had, and nothing of the caller's in between:
a scope held open across a ``yield`` would take in the caller's calls and break the nesting of scopes on the thread.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import AsyncGenerator, Coroutine, Generator
from itertools import repeat
from typing import Any

import torch

from .calls import INSIDE_CALL, OTHER_THREAD, on_other_thread
from .scope_gate import NO_SCOPE
from .scope_gate import OPEN as scopes_open

_Scope = torch._C._profiler._RecordFunctionFast
LAZY_RESULTS = frozenset({types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType, map, filter})


def resumed_in_scope(result: Any, scope_name: str) -> Any:
    """``result`` (a generator, coroutine, async generator, ``map`` or ``filter`` object of the forward scoped as
    ``scope_name``) as one of its type whose every resume runs in that scope, with the call state of the forward
    that made it."""
    resume = _Resume(scope_name, INSIDE_CALL.get())
    kind = type(result)
    if kind is types.GeneratorType:
        return _stepped(result, resume)
    if kind is types.CoroutineType:
        return _coroutine_stepped(result, resume)
    if kind is map:  # a map over "next of the original, in scope" that ends where the original ends
        return map(_next_in_scope, repeat(result), repeat(resume))
    if kind is filter:
        return filter(_kept, map(_next_in_scope, repeat(result), repeat(resume)))
    return _async_generator_stepped(result, resume)


def handed_back(result: Any, scope_name: str) -> Any:
    """What the forward scoped as ``scope_name`` hands back for its ``result`` (not a tensor): a lazy result resumed
    in its scope, one held in a tuple, list, dict or named tuple too (``held_results_in_scope``), else ``result``."""
    kind = type(result)  # by type: a __class__ of its own may raise
    if kind in LAZY_RESULTS:  # its code runs when the caller iterates or awaits it
        return resumed_in_scope(result, scope_name)
    if kind is tuple or kind is list:  # may hold one (return tokens, state): a loop costs less than a C scan's set-up
        for item in result:
            if type(item) in LAZY_RESULTS:
                return held_results_in_scope(result, scope_name)
        return result
    if kind is dict or kind.__base__ is tuple:  # a dict or a named tuple, seldom a forward's result
        return held_results_in_scope(result, scope_name)
    return result


def held_results_in_scope(result: Any, scope_name: str) -> Any:
    """``result`` (a tuple, list or dict, or a named tuple) with each lazy result it holds (one level: ``return
    tokens, state``) resumed in the forward's scope (``resumed_in_scope``): a list or dict changed in place (the same
    object, as the model may hold it too), a tuple or named tuple made again as its own type; ``result`` itself
    where it holds none."""
    kind = type(result)
    if kind is dict:
        found = [key for key, value in result.items() if type(value) in LAZY_RESULTS]
        for key in found:
            result[key] = resumed_in_scope(result[key], scope_name)
        return result
    if kind is not list and (kind is not tuple and not _named_tuple(kind)):
        return result
    items = list(tuple.__iter__(result)) if kind is not list else result
    if LAZY_RESULTS.isdisjoint(map(type, items)):
        return result
    found = [index for index, value in enumerate(items) if type(value) in LAZY_RESULTS]
    if kind is list:
        for index in found:
            result[index] = resumed_in_scope(result[index], scope_name)
        return result
    for index in found:
        items[index] = resumed_in_scope(items[index], scope_name)
    return tuple.__new__(kind, items)  # as a named tuple's _make makes it


def _named_tuple(kind: type) -> bool:
    """A named tuple's class, whose instances are their items alone (no ``__dict__`` of a subclass's)."""
    return issubclass(kind, tuple) and hasattr(kind, "_fields") and not kind.__dictoffset__


def _next_in_scope(iterator: Any, resume: _Resume) -> Any:
    with resume:
        return next(iterator)  # its StopIteration ends the map around it, as the original's end


def _kept(item: Any) -> bool:
    return True


class _Resume:
    """The context of one resume: the module's scope and the forward's call state, on a thread the recording scopes
    while it runs; nothing elsewhere (the recording over, or another thread resuming it)."""

    __slots__ = ("scope_name", "state", "token", "scope")

    def __init__(self, scope_name: str, state: Any) -> None:
        self.scope_name, self.state, self.token, self.scope = scope_name, state, None, None

    def __enter__(self) -> None:
        if INSIDE_CALL.get() is OTHER_THREAD and on_other_thread():
            self.token = None
            return
        self.token = INSIDE_CALL.set(self.state)
        self.scope = _Scope(self.scope_name) if scopes_open[0] else NO_SCOPE
        self.scope.__enter__()

    def __exit__(self, *exc_info: Any) -> None:
        if self.token is not None:
            try:
                self.scope.__exit__(*exc_info)
            finally:
                INSIDE_CALL.reset(self.token)
                self.token = self.scope = None


def _stepped(inner: Any, resume: _Resume) -> Generator:
    """``yield from inner`` (PEP 380: values sent, exceptions thrown, close and the return value passed through)
    with each step of ``inner`` run inside ``resume``. ``inner``: a generator, or a coroutine's or an awaitable's
    iterator (``send``, ``throw``, ``close``)."""
    step, value = inner.send, None
    while True:
        try:
            with resume:
                item = step(value)
        except StopIteration as stop:
            return stop.value
        try:
            value = yield item
            step = inner.send
        except GeneratorExit:
            with resume:
                inner.close()
            raise
        except BaseException as exc:  # thrown in by the caller: thrown into the original, as yield from does
            step, value = inner.throw, exc


class _Awaited:
    """An awaitable whose steps are those of an iterator of ``send``/``throw``/``close``."""

    __slots__ = ("steps",)

    def __init__(self, steps: Generator) -> None:
        self.steps = steps

    def __await__(self) -> Generator:
        return self.steps


async def _coroutine_stepped(coroutine: Any, resume: _Resume) -> Coroutine:
    return await _Awaited(_stepped(coroutine.__await__(), resume))


class _AsyncStepsInScope:
    """An async generator's ``asend``, ``athrow`` and ``aclose``, each step of the awaitable they return run inside
    ``resume``."""

    __slots__ = ("generator", "resume")

    def __init__(self, generator: Any, resume: _Resume) -> None:
        self.generator, self.resume = generator, resume

    def asend(self, value: Any) -> _Awaited:
        return _Awaited(_stepped(self.generator.asend(value).__await__(), self.resume))

    def athrow(self, exc: BaseException) -> _Awaited:
        return _Awaited(_stepped(self.generator.athrow(exc).__await__(), self.resume))

    def aclose(self) -> _Awaited:
        return _Awaited(_stepped(self.generator.aclose().__await__(), self.resume))


def _async_generator_stepped(generator: Any, resume: _Resume) -> AsyncGenerator:
    return _passed_through(lambda: _AsyncStepsInScope(generator, resume))()


def _passed_through(make: Any) -> Any:
    """An async generator function whose generator is ``make(*args, **kwargs)``'s (an async generator, or what has
    its ``asend``, ``athrow`` and ``aclose``), as ``async for item in generator: yield item`` with asend, athrow and
    aclose passed through."""

    async def passing_through(*args: Any, **kwargs: Any) -> AsyncGenerator:
        generator = make(*args, **kwargs)
        step, value = generator.asend, None
        while True:
            try:
                item = await step(value)
            except StopAsyncIteration:
                return
            try:
                value = yield item
                step = generator.asend
            except GeneratorExit:
                await generator.aclose()
                raise
            except BaseException as exc:  # thrown in by the caller (athrow): into the original
                step, value = generator.athrow, exc

    return passing_through


def of_its_kind(wrapper: Any, function: Any) -> Any:
    """``wrapper`` (a plain function that returns what ``function`` returns) as a function of ``function``'s kind, so
    that the program's questions while it is recorded (``inspect.iscoroutinefunction``, ``isasyncgenfunction``,
    ``isgeneratorfunction``; asyncio's and libraries' dispatch on them) get the answers ``function`` gets: a
    coroutine function marked as one (Python >= 3.12) or awaiting it, an async generator or a generator function
    passing its steps through. Such a wrapper calls ``wrapper`` at the first step instead of at the call, where
    the original runs none of its code either."""
    if inspect.isasyncgenfunction(function):
        return _passed_through(wrapper)
    if inspect.iscoroutinefunction(function):
        if hasattr(inspect, "markcoroutinefunction"):
            return inspect.markcoroutinefunction(wrapper)

        async def coroutine_in_scope(*args: Any, **kwargs: Any) -> Any:
            return await wrapper(*args, **kwargs)

        return coroutine_in_scope
    if inspect.isgeneratorfunction(function):

        def generator_in_scope(*args: Any, **kwargs: Any) -> Generator:
            return (yield from wrapper(*args, **kwargs))

        return generator_in_scope
    return wrapper
