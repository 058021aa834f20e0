"""The compiled calls of observed modules that the recorder scopes from outside them (instrument.py): the compiled
methods a module holds beside its forward (``compiled.compiled_methods``), a ``torch.compile(module)`` that is not
observed itself (``compiled.calls_of_wrappers``) and a compiled method the program keeps
(recorder/compiled_functions.py). Each runs as the call ``torch.compile`` in the module's scope, with the model's own
values of the attributes patched in the ``__dict__`` of the module and of the modules under it put back, which its
compiled graphs guard: every such patch, the compiled methods' own included (a compiled call traces those of the
modules under it, and guards that their attributes hold them)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kernelscope.analyzer.rundir import COMPILED_REGION_CALL, MODULE_PREFIX, scope_text
from torch import nn

from .compiled import compiled_forward, compiled_methods
from .compiled_functions import with_own_values
from .recordings import sample_scopes
from .samples import SampleBook


def scope_namer(name: str, book: SampleBook | None):
    """A function (args, kwargs) -> scope name, for the calls off the per-call path."""
    record, labels = sample_scopes(name, book)
    return lambda args, kwargs: labels[record(args, kwargs)]


def compiled_calls_scoped(
    saved: list, named_modules: Iterable, sampled: Any, calls: str, patch_module: Any, missing: Any
) -> Any:
    """Scope the compiled methods the observed modules (``named_modules``) hold, through ``patch_module``; returns
    ``held_of``: of an observed module, what a compiled call of it runs with (``_compiled_call_scope``), the very one
    its held compiled methods run with, else made at its first call, when every patch is in place; None for any other
    object. ``saved``: the patches, as instrument's ``_Patches`` saves them, ``missing`` their marker of an attribute
    that was not there."""
    named_modules = list(named_modules)
    made: dict[int, tuple] = {}
    for name, module in named_modules:
        methods = compiled_methods(module)
        if methods:
            made[id(module)] = found = _compiled_call_scope(saved, module, name, sampled)
            for attribute, method in methods:
                patch_module(module, attribute, run_as_compiled_method(method, found, calls == "all", missing))
    modules = {id(module): (name, module) for name, module in named_modules}
    for key, (held, *_) in made.items():  # the lists the wrappers hold, with every compiled method's patch now
        held[:] = _own_values_held(saved, modules[key][1])

    def held_of(module: Any) -> tuple | None:
        key = id(module)
        if key not in modules:
            return None
        if key not in made:
            made[key] = _compiled_call_scope(saved, module, modules[key][0], sampled)
        return made[key]

    return held_of


def _compiled_call_scope(saved: list, module: nn.Module, name: str, sampled: Any) -> tuple:
    """What a compiled call of the observed ``module`` (``name``) runs with: the patches of the ``__dict__`` of it
    and of the modules under it, its scope name, a namer of the call ``torch.compile`` and the module itself (its
    compiled frames' ``self``)."""
    namer = scope_namer(COMPILED_REGION_CALL, sampled(COMPILED_REGION_CALL))
    return _own_values_held(saved, module), MODULE_PREFIX + scope_text(name), namer, module


def _own_values_held(saved: list, module: nn.Module) -> list:
    """The patches in place of the ``__dict__`` of ``module`` and of the modules under it (a patch of many attributes
    at once is of a class or a Python module, never of a dict)."""
    dicts = {id(vars(m)) for m in module.modules()}
    return [patch for patch in saved if isinstance(patch[0], dict) and id(patch[0]) in dicts]


def run_as_compiled_method(call: Any, found: tuple, marks_its_calls: bool, missing: Any) -> Any:
    """``call`` in the scopes ``found`` (``_compiled_call_scope``) names, with the model's own values of its patches
    back while it runs."""
    held, scope, namer, module = found
    return compiled_forward(with_own_values(call, held, missing), scope, namer, marks_its_calls, ("", module))


def wrapper_scopes(held_of: Any, missing: Any) -> Any:
    """For ``compiled.calls_of_wrappers``: of an observed module (``held_of``: ``compiled_calls_scoped``'s), a
    function of a torch.compile'd wrapper's bound call that runs it as a compiled method is run; the torch calls made
    at its graph breaks keep their own scopes, as when nothing scopes the wrapper."""

    def scoped(module: Any) -> Any:
        found = held_of(module)
        if found is None:
            return None
        return lambda call: run_as_compiled_method(call, found, False, missing)  # found: made once per module

    return scoped
