"""A class's ``forward`` scoped in place: the function object stays its class's, its code is swapped for the recording.

A model may compare a forward with what it holds of it (``type(self).forward is forward_with_checkpointing`` in
transformers' checkpointing layers, ``m.forward.__func__ is Child.forward``, a reference kept at import, a
``functools.wraps`` decorator's ``__wrapped__``, ``inspect.getattr_static``) and take another branch where it differs.
So no class attribute is replaced: each class forward (a Python function) keeps its identity, name, defaults,
closure and ``__dict__``, and gets for the recording a code object with its very parameters (so
``inspect.signature``, its file and first line answer as before) whose body calls the class-level wrapper
(recorder/class_forwards.py) through a name put in the function's globals while recorded. The wrapper calls
``inner_of(function)``, a function made of the original code, globals, closure and defaults, which the instance path
calls too. The code is put back afterwards. Its code kept: an async generator forward (its ``asend`` and ``athrow``
cannot be passed through a body of ours) and a function whose code dynamo compiled frames of (its compiled entries are
kept on that code object, and a model compiled before the recording runs them): those get the wrapper in their
class's place instead, so that a call through the class is scoped, and the class's ``forward`` is not the function
itself while recorded.
"""

from __future__ import annotations

import inspect
import types
import weakref
from typing import Any

import torch

_HIS_OWN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
_cache_entries = getattr(torch._C._dynamo.eval_frame, "_debug_get_cache_entry_list", None)
_inner: dict[int, tuple[types.FunctionType, types.FunctionType]] = {}  # id(function) -> (function, its inner copy)


def inner_of(function: Any) -> Any:
    """The function to call for ``function`` (a class's forward) while recorded: a copy of it with its original code,
    made once a process while ``function`` holds that code (the same object for every recording); anything but a
    Python function is itself."""
    if type(function) is not types.FunctionType:
        return function
    held = _inner.get(id(function))
    if held is not None and held[0] is function:
        if held[1].__code__ is function.__code__ or _is_swapped(function.__code__):
            return held[1]
    copy = types.FunctionType(
        function.__code__, function.__globals__, function.__name__, function.__defaults__, function.__closure__
    )
    copy.__kwdefaults__, copy.__qualname__ = function.__kwdefaults__, function.__qualname__
    _inner[id(function)] = (function, copy)
    return copy


_GLOBAL_PREFIX = "__kernelscope_forward_"


def defaults_followed() -> None:
    """Every inner copy given its function's defaults as they are now: a recording puts wrappers in a forward's
    defaults (``def forward(self, x, norm=F.layer_norm)``: recorder/stored_references.py) after the instances took
    their copies, and puts them back afterwards."""
    for function, copy in _inner.values():
        copy.__defaults__, copy.__kwdefaults__ = function.__defaults__, function.__kwdefaults__


def _is_swapped(code: types.CodeType) -> bool:
    """Whether ``code`` is one ``swapped_code`` made (the name it calls is in its names)."""
    return any(name.startswith(_GLOBAL_PREFIX) for name in code.co_names)


# function -> (its code, what _made_code gave for them): compiling the source cost each recording ~0.1 ms a class
# forward; held weakly, so a model's classes made and dropped (a process profiling many) are not kept alive by it
_swapped: weakref.WeakKeyDictionary[types.FunctionType, tuple[types.CodeType, tuple[str, types.CodeType] | None]] = (
    weakref.WeakKeyDictionary()
)


def swapped_code(function: types.FunctionType) -> tuple[str, types.CodeType] | None:
    """``(name, code)``: the code that calls the global ``name`` with ``function``'s arguments as they came, of its
    kind (a generator's yields from what it returns, a coroutine's awaits it); None where it is left as it is. Made
    once a process for a function holding the same code."""
    code = function.__code__
    if code.co_flags & (inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE):
        return None
    if _cache_entries is not None and _cache_entries(code):  # dynamo compiled frames of it
        return None
    made = _swapped.get(function)
    if made is None or made[0] is not code:
        made = _swapped[function] = (code, _made_code(function, code))
    return made[1]


def _made_code(function: types.FunctionType, code: types.CodeType) -> tuple[str, types.CodeType] | None:
    flags = code.co_flags
    name = f"{_GLOBAL_PREFIX}{id(function)}__"
    positional = code.co_varnames[: code.co_argcount]
    keyword_only = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    rest = code.co_argcount + code.co_kwonlyargcount
    varargs = code.co_varnames[rest] if flags & inspect.CO_VARARGS else None
    varkw = code.co_varnames[rest + (varargs is not None)] if flags & inspect.CO_VARKEYWORDS else None
    params = list(positional[: code.co_posonlyargcount])
    if code.co_posonlyargcount:
        params.append("/")
    params += positional[code.co_posonlyargcount :]
    if varargs or keyword_only:
        params.append(f"*{varargs or ''}")
    params += keyword_only
    arguments = [*positional, *([f"*{varargs}"] if varargs else []), *(f"{k}={k}" for k in keyword_only)]
    if varkw:
        params.append(f"**{varkw}")
        arguments.append(f"**{varkw}")
    call = f"{name}({', '.join(arguments)})"
    if flags & inspect.CO_GENERATOR:
        body, define = f"return (yield from {call})", "def"
    elif flags & inspect.CO_COROUTINE:
        body, define = f"return await {call}", "async def"
    else:
        body, define = f"return {call}", "def"
    free = code.co_freevars
    source = (
        (f"def outer():\n    {' = '.join((*free, 'None'))}\n" if free else "def outer():\n")
        + f"    {define} swapped({', '.join(params)}):\n"
        + (f"        if 0: ({', '.join(free)},)\n" if free else "")
    )
    source += f"        {body}\n    return swapped\n"
    namespace: dict = {}
    exec(compile(source, code.co_filename, "exec"), namespace)  # noqa: S102 - source of names read from a code object
    made = namespace["outer"]().__code__
    if made.co_freevars != free or made.co_flags & _HIS_OWN != flags & _HIS_OWN:
        return None
    made = made.replace(co_firstlineno=code.co_firstlineno, co_name=code.co_name, co_qualname=code.co_qualname)
    return name, made
