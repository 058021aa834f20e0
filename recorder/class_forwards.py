"""A recorded module's forward reached through its class: ``type(child).forward(child, x)``,
``ChildClass.forward(self.child, x)``, ``nn.Linear.forward(self.lin, x)``, ``self.child.forward(x)`` called from a
parent's forward.

A module whose forward is its class's own is scoped by its instance ``_call_impl`` (recorder/hooked_calls.py), which
``nn.Module.__call__`` reads; a call of its forward that does not go through ``__call__`` reaches the class's
function. That function keeps its identity and its place (recorder/forward_codes.py swaps its code): its new code calls
a wrapper that opens the instance's scope, only where ``self`` is a scoped module whose scope is not the innermost
module scope open on the thread: ``super().forward(x)`` inside a subclass's forward, and the instance's own scoped
path, never open it twice. The instance's scoped path calls the function's original code (``inner_of``), so it never
reaches these wrappers: they cost nothing on the usual path, and finding the innermost scope (a walk up the frames to
the nearest module wrapper's) only where a forward is reached some other way.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import torch
from torch import nn

from .calls import INSIDE_CALL, OTHER_THREAD, on_other_thread
from .compiled import dynamo_tracing
from .forward_codes import inner_of, swapped_code
from .lazy_results import handed_back, of_its_kind
from .scope_gate import NO_SCOPE
from .scope_gate import OPEN as scopes_open
from .wrapping import wraps

_Scope = torch._C._profiler._RecordFunctionFast
_Tensor = torch.Tensor
_FRAMES_LOOKED_AT = 64  # past them, a forward is taken to be reached from outside any scoped module


class ScopedInstances:
    """The scoped modules of one recording: ``id(module) -> (module, scope name or None, folded suffix or None)``,
    and the code of the instance wrappers whose frames mark a module's scope (``module`` is the object their forward
    is bound to)."""

    def __init__(self) -> None:
        self.scopes: dict[int, tuple[nn.Module, str | None, str | None, Any]] = {}
        self.wrapper_codes: set[types.CodeType] = set()

    def add(self, module: nn.Module, wrapper: Any, scope_name: str | None, folded_suffix: str | None) -> None:
        """``wrapper``: the module's instance forward; the code of its class's forward is kept (read before the
        classes are patched) to tell ``super().forward`` from the module's own forward cheaply."""
        forward_code = getattr(getattr(type(module), "forward", None), "__code__", None)
        self.scopes[id(module)] = (module, scope_name, folded_suffix, forward_code)
        code = getattr(wrapper, "__code__", None)
        if code is not None:
            self.wrapper_codes.add(code)


def class_forward_sites(instances: ScopedInstances, left_alone: set[int]) -> tuple[list, list]:
    """``([(function, name, code, wrapper)], [(class, replacement)])`` for the classes of the scoped modules, up their
    method resolution order to ``nn.Module`` (excluded: its forward raises): each ``forward`` that is a Python
    function, with the code to put in it and the wrapper that code calls by ``name`` from its globals
    (recorder/forward_codes.py), or, where its code is kept (``swapped_code``), that wrapper to put in its place; and
    each that is a data descriptor, with the one to put in its place.
    ``left_alone``: ids of the classes whose forward dynamo may have traced (a compiled module's), and of functions
    whose code is swapped already."""
    codes, descriptors, seen = [], [], set(left_alone)
    for module, *_ in list(instances.scopes.values()):
        for kind in type(module).__mro__:
            if kind is nn.Module or id(kind) in seen:
                break
            seen.add(id(kind))
            function = vars(kind).get("forward")
            if isinstance(function, types.FunctionType):
                if id(function) in seen:  # one class's forward held by another (``forward = Base.forward``): swapped
                    continue
                swapped = swapped_code(function)
                if swapped is not None:
                    seen.add(id(function))
                    codes.append((function, *swapped, _class_forward(inner_of(function), instances, 2)))
                elif not _holds_itself(function):  # its code kept: a wrapper in each class's place
                    wrapper = _class_forward(function, instances, 1)
                    descriptors.append((kind, wraps(of_its_kind(wrapper, function), function)))
            elif is_data_descriptor(function):
                descriptors.append((kind, _ScopedDescriptor(function, instances)))
    return codes, descriptors


def _holds_itself(function: types.FunctionType) -> bool:
    """Whether ``function`` holds itself in its closure: a forward that tells whether it is still its class's
    (transformers' checkpointing layers: ``type(self).forward is forward_with_checkpointing``), which a wrapper in its
    class's place would answer no; where its code is kept (``swapped_code``), its class keeps it, and a call through
    that class stays the caller's."""
    for cell in function.__closure__ or ():
        try:
            if cell.cell_contents is function:
                return True
        except ValueError:  # a cell not yet filled
            continue
    return False


def class_of_its_forward(module: nn.Module, no_instance_forward: bool) -> type | None:
    """``module``'s class where the forward it runs is that class's own, bound to it (no instance attribute): its
    instance wrapper then follows a change of the module's class (``forward_of_its_class``); else None."""
    forward = module.forward
    if not (no_instance_forward and isinstance(forward, types.MethodType) and forward.__self__ is module):
        return None
    return type(module) if forward.__func__ is getattr(type(module), "forward", None) else None


def forward_of_its_class(module: nn.Module) -> Any:
    """The forward of ``module``'s class now, bound to it, called with the module first as the instance wrapper's
    function is: the program changed the class while recorded (``module.__class__ = Fast``, as libraries that swap in
    an implementation at a first call do); the instance wrapper, which would shadow it, runs it in the module's
    scope, as it runs unrecorded."""
    forward = type(module).forward.__get__(module, type(module))
    return lambda _module, *args, **kwargs: forward(*args, **kwargs)


def is_data_descriptor(value: Any) -> bool:
    """Whether ``value``, a class's ``forward``, wins over an instance attribute of that name (a ``property`` that
    returns the callable to run does): the instance wrapper every other module gets would never be read."""
    kind = type(value)
    return hasattr(kind, "__get__") and (hasattr(kind, "__set__") or hasattr(kind, "__delete__"))


def forward_is_data_descriptor(module: nn.Module) -> bool:
    """Whether ``module``'s class finds ``forward`` as a data descriptor (``is_data_descriptor``), read without
    running its getter (which may need state the forward's caller sets)."""
    for kind in type(module).__mro__:
        if "forward" in vars(kind):
            return is_data_descriptor(vars(kind)["forward"])
    return False


class _ScopedDescriptor:
    """A class's ``forward`` that is a data descriptor, in place of it for the recording: what it gives a scoped
    module runs in that module's scope; everything else is the original's."""

    def __init__(self, descriptor: Any, instances: ScopedInstances) -> None:
        self.descriptor, self.scopes = descriptor, instances.scopes

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        value = self.descriptor.__get__(instance, owner)
        entry = None if instance is None or dynamo_tracing() else self.scopes.get(id(instance))
        if entry is None or entry[0] is not instance or entry[1] is None:
            return value
        if INSIDE_CALL.get() is OTHER_THREAD and on_other_thread():
            return value
        return _value_in_scope(value, entry[1])

    def __set__(self, instance: Any, value: Any) -> None:
        type(self.descriptor).__set__(self.descriptor, instance, value)

    def __delete__(self, instance: Any) -> None:
        type(self.descriptor).__delete__(self.descriptor, instance)

    def __getattr__(self, name: str) -> Any:  # fget, __doc__...: the original's
        return getattr(self.descriptor, name)


def _value_in_scope(value: Any, scope_name: str) -> Any:
    def forward_in_scope(*args, **kwargs):
        with _Scope(scope_name) if scopes_open[0] else NO_SCOPE:
            result = value(*args, **kwargs)
        return result if type(result) is _Tensor else handed_back(result, scope_name)

    return wraps(of_its_kind(forward_in_scope, value), value)


def _class_forward(function: Any, instances: ScopedInstances, depth: int) -> Any:
    """The class-level wrapper of ``function`` (a class's ``forward``); ``depth``: where its caller's frame is (2
    above the swapped code that calls it, 1 in the class's place)."""
    scopes, codes = instances.scopes, instances.wrapper_codes

    def forward_through_the_class(self, *args, **kwargs):
        entry = None if dynamo_tracing() else scopes.get(id(self))
        if entry is None or entry[0] is not self or INSIDE_CALL.get() is OTHER_THREAD and on_other_thread():
            return function(self, *args, **kwargs)
        if _innermost_is(self, entry[3], sys._getframe(depth), codes, own_code):  # super().forward, or its own path
            return function(self, *args, **kwargs)
        _module, scope_name, folded_suffix, _code = entry
        if folded_suffix is not None:  # a module folded into its one call: the call names the module
            token = INSIDE_CALL.set(folded_suffix)
            try:
                return function(self, *args, **kwargs)
            finally:
                INSIDE_CALL.reset(token)
        with _Scope(scope_name) if scopes_open[0] else NO_SCOPE:
            result = function(self, *args, **kwargs)
        return result if type(result) is _Tensor else handed_back(result, scope_name)

    own_code = forward_through_the_class.__code__
    return forward_through_the_class


def _innermost_is(module: Any, forward_code: Any, frame: Any, wrapper_codes: set, own_code: types.CodeType) -> bool:
    """Whether ``module``'s scope is the innermost module scope open above ``frame`` (its caller's): at once where
    the caller runs the code of ``module``'s own forward (``super().forward(x)``; reading the caller's ``self`` would
    double this path's cost, and a forward calling its own class's forward on another instance of the class through
    the base class is left in its scope, as it was without these wrappers), else looked up
    (``_innermost_scoped_module``)."""
    if frame.f_code is forward_code:
        return True
    return _innermost_scoped_module(frame, wrapper_codes, own_code) is module


def _innermost_scoped_module(frame: Any, wrapper_codes: set, own_code: types.CodeType) -> Any:
    """The module whose scope is the innermost open above ``frame``: the nearest frame of an instance wrapper (its
    ``forward``'s ``__self__``) or of a class-level wrapper (its ``self``); None where none is near."""
    for _ in range(_FRAMES_LOOKED_AT):
        if frame is None:
            return None
        code = frame.f_code
        if code is own_code:  # every class-level wrapper's (one code, many closures)
            return frame.f_locals.get("self")
        if code in wrapper_codes:  # the object their forward is bound to: "module", or a folded one's first argument
            names = frame.f_locals
            return names["module"] if "module" in names else next(iter(names.get("args", ())), None)
        frame = frame.f_back
    return None
