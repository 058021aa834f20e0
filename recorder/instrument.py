"""Scope annotations around module forwards and calls, for one recording.

Scopes use ``torch._C._profiler._RecordFunctionFast`` (several times cheaper than
``torch.profiler.record_function``: benchmarks/RESULTS.md, "The scope itself"); it appears in the trace as a
``cpu_op`` named exactly like the scope. Names: ``ks.module:<dotted name>`` and
``ks.fn:<call>#<sample id>`` (``ks.fn:<call>`` when samples of that call are not collected). The scope of
a torch.nn module whose forward is one functional call (``nn.Linear``, ``nn.ReLU``…) is folded into that
call's: ``ks.fn:linear#3@encoder.fc``, one scope instead of two (``folds_into_its_call``: recorder/module_scopes.py).

What is patched, all of it put back exactly afterwards (``F.<name>`` is the identical object again,
and a module that had no instance attribute ``forward`` has none; an attribute the model rebinds while recorded keeps
the model's binding):

- module forwards: an instance ``forward`` that opens the module's scope; a ``torch.compile``d module (however
  compiled: ``compiled.compiled_entry``) is scoped as the call ``torch.compile`` and the modules inside it are
  left alone (they are traced into its graphs: patched, they would fail its guards);
- the ``torch.nn.functional`` namespace: every public function, so calls between functionals
  (``F.multi_head_attention_forward`` -> ``F.linear``) are each scoped and the innermost owns its kernels;
- with ``calls="all"`` (recorder/calls.py): torch-level calls outside functionals and functionals held by
  stored references.
- ``nn.Module.__reduce_ex__``, so that a module the model copies or pickles while recorded holds its own values
  (recorder/copies.py);
- the instance ``_call_impl`` of every scoped module, so that hooks it has or is given at any time, and a forward
  the model sets on it, run in its scope (recorder/hooked_calls.py).

The functions' wrappers are made once per process, for the exact objects they wrap (recorder/wrappers.py).

A CUDA graph replay gets no scope: the analyzer names its kernels ``torch.cuda.CUDAGraph.replay`` from their
launch (``cudaGraphLaunch``), which the trace holds anyway, when no call scope holds the launch; the enclosing
scopes give its module.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
from kernelscope.analyzer.rundir import COMPILED_REGION_CALL, MODULE_PREFIX, MODULE_SEPARATOR, scope_text
from torch import nn

from . import class_forwards
from .calls import INSIDE_CALL, OTHER_THREAD, on_other_thread
from .class_forwards import ScopedInstances, class_forward_sites
from .compiled import (
    calls_of_wrappers,
    compiled_code_kept,
    compiled_entry,
    compiled_forward,
    dynamo_tracing,
    entries_compiled_while_patched_dropped,
    import_what_the_profiler_imports,
    optimized_module_type,
)
from .compiled_calls import compiled_calls_scoped, scope_namer, wrapper_scopes
from .compiled_functions import callback_seeing_compiled_methods, eval_frame_module
from .copies import copies_without_patches
from .dynamo_tables import dynamo_tables_of_originals, overrides_tables_naming_wrappers
from .exported import has_module_stacks, scoped_graph_forward
from .forward_codes import defaults_followed, inner_of
from .graph_code import GraphCode
from .hooked_calls import SCOPE_CODE, call_in_scope, call_in_scope_when_hooked
from .inductor_kernels import inductor_kernel_sites
from .interpreter_state import gc_paused, recursion_room
from .late_imports import late_imports_put_back
from .lazy_results import LAZY_RESULTS, handed_back, held_results_in_scope, of_its_kind
from .module_scopes import folds_into_its_call, launches_no_kernel
from .recordings import recording_of
from .reference_slots import FunctionCode
from .samples import SampleBook
from .scope_gate import NO_SCOPE
from .scope_gate import OPEN as scopes_open
from .sequence_slots import SequenceSlotsKept
from .stored_references import Slots, held_forward, stored_reference_sites
from .threads import model_threads
from .torch_tracing import torch_tracing_unscoped
from .torchscript import scripting_sees_originals
from .wrappers import functional_names, patch_plan  # noqa: F401 (tests read the rule)
from .wrapping import bound_like, wraps

_Scope = torch._C._profiler._RecordFunctionFast
_Tensor = torch.Tensor
_MISSING = object()
_MANY = object()  # the key of a saved patch that set many attributes of one owner at once
CALLS = ("all", "functional")


def _module_forward(forward: Any, scope_name: str, in_scope: Any = None, kind: type | None = None):
    """``forward`` in the module's scope on the model's threads; ``in_scope``: what runs there in its place (an
    exported program's graph with its own module scopes: recorder/exported.py). A generator or coroutine it returns
    runs in that scope too, whenever it is resumed (recorder/lazy_results.py). ``kind``: the module's class, where
    ``forward`` is that class's bound to it: a module whose class the program changes while recorded
    (``module.__class__ = Fast``, as libraries that swap in an implementation at a first call do) runs its new
    class's forward, as it would unrecorded (the instance attribute would shadow it). A bound ``forward`` gets a
    wrapper bound as it is (``wrapping.bound_like``), which calls its function with the module first."""
    inside_call, method = INSIDE_CALL.get, in_scope is None and isinstance(forward, types.MethodType)
    own = inner_of(forward.__func__) if method else forward  # its original code: the class's may be swapped
    scoped, module = own if in_scope is None else in_scope, getattr(forward, "__self__", None)

    def forward_in_scope(*args, **kwargs):
        run = scoped if kind is None or type(module) is kind else class_forwards.forward_of_its_class(module)
        if dynamo_tracing() or inside_call() is OTHER_THREAD and on_other_thread():  # recorder/threads.py
            return (own if run is scoped else run)(*args, **kwargs)
        with _Scope(scope_name) if scopes_open[0] else NO_SCOPE:
            result = run(*args, **kwargs)
        kind_of_result = type(result)  # a lazy result runs later: handed back to run in the scope (handed_back)
        if kind_of_result is _Tensor:
            return result
        if kind_of_result is tuple:  # the usual other result, looked into here: handed_back's frame cost as much
            for item in result:
                if type(item) in LAZY_RESULTS:
                    return held_results_in_scope(result, scope_name)
            return result
        return handed_back(result, scope_name)

    wrapper = of_its_kind(forward_in_scope, forward)
    return bound_like(wrapper, forward) if method else wraps(wrapper, forward)


def _folded_forward(forward: Any, module_suffix: str):
    """The forward of a module whose scope is folded into its call's (``folds_into_its_call``): no scope of
    its own; the call made inside names the module after its own name (``ks.fn:linear#3@encoder.fc``). ``forward``:
    torch's own class's, bound to the module, as the wrapper is (``wrapping.bound_like``)."""
    inside_call, enter_call, leave_call = INSIDE_CALL.get, INSIDE_CALL.set, INSIDE_CALL.reset
    function = inner_of(forward.__func__)  # its original code: the class's may be swapped

    def forward_in_call_scope(*args, **kwargs):  # the module first
        if dynamo_tracing() or inside_call() is OTHER_THREAD and on_other_thread():  # recorder/threads.py
            return function(*args, **kwargs)
        token = enter_call(module_suffix)
        try:
            return function(*args, **kwargs)
        finally:
            leave_call(token)

    return bound_like(forward_in_call_scope, forward)


class _Patches:
    """Attribute replacements on dicts and classes, undone in reverse order, exactly: an attribute that no longer
    holds what was put there (the model rebound it while recorded, as libraries that patch torch at their first
    call do) keeps the model's binding."""

    def __init__(self) -> None:
        self.saved: list[tuple[Any, str, Any, Any]] = []  # (owner, key, the value before, the value put there)
        self.classes = SequenceSlotsKept()  # setting torch.Tensor.__getitem__ changes more than the attribute

    def set_item(self, owner: dict | Slots, key: Any, value: Any, before: Any = None) -> None:
        """``before``: what to put back, where reading the attribute filled a cache in ``owner`` (a loaded
        TorchScript module keeps each method it is asked for in its ``__dict__``); else what ``owner`` holds now."""
        self.saved.append((owner, key, owner.get(key, _MISSING) if before is None else before, value))
        owner[key] = value

    def set_attribute(self, owner: Any, key: str, value: Any) -> None:
        """For classes and modules, whose ``__dict__`` cannot be written directly (classes) or is
        written like any other (modules)."""
        self.saved.append((owner, key, vars(owner).get(key, _MISSING), value))
        self.classes.setattr(owner, key, value)

    def set_all(self, owner: Any, values: dict[str, Any]) -> None:
        """Many attributes of one owner at once, undone as one: a module's in one update of its ``__dict__``,
        a class's one by one (``set_attribute``)."""
        namespace = vars(owner)
        self.saved.append((owner, _MANY, {key: namespace.get(key, _MISSING) for key in values}, values))
        if isinstance(owner, types.ModuleType):
            namespace.update(values)
        else:
            self.classes.set_many(owner, values, _MISSING)

    def undo(self) -> None:
        while self.saved:
            owner, key, before, put = self.saved.pop()
            if key is _MANY:
                self._undo_all(owner, before, put)
                continue
            items = isinstance(owner, (dict, Slots))
            now = (owner if items else vars(owner)).get(key, _MISSING)
            if now is not put:  # rebound by the model meanwhile
                continue
            if items:
                if before is _MISSING:
                    owner.pop(key, None)
                else:
                    owner[key] = before
            elif before is _MISSING:
                self.classes.delattr(owner, key)
            else:
                self.classes.setattr(owner, key, before)

    def _undo_all(self, owner: Any, before: dict[str, Any], put: dict[str, Any]) -> None:
        namespace = vars(owner)
        before = {key: value for key, value in before.items() if namespace.get(key, _MISSING) is put[key]}
        if isinstance(owner, types.ModuleType):
            namespace.update(before)
            for key in [key for key, value in before.items() if value is _MISSING]:
                del namespace[key]
            return
        self.classes.set_many(owner, dict(reversed(before.items())), _MISSING)


@contextmanager
def instrumented(
    named_modules: Iterable[tuple[str, nn.Module]],
    book: SampleBook,
    collect: set[str] | None,
    calls: str = "all",
    functions: bool = True,
) -> Iterator[Any]:
    """Scopes on every module forward and call for the duration of the block.

    ``collect``: names whose samples go to ``book`` (None = all). ``calls``: ``"all"`` or ``"functional"``
    (only the ``torch.nn.functional`` namespace, as aitune's profiler sees it). With the functions patched,
    torch.compile'd code runs what it compiled before (``compiled.compiled_code_kept``). ``functions=False``:
    only module forwards and compiled modules get scopes, and dynamo compiles freely (nothing it guards is
    patched): profile()'s way out when compiled code cannot be kept.
    """
    if calls not in CALLS:
        raise ValueError(f"calls must be one of {CALLS}, not {calls!r}")

    import_what_the_profiler_imports()
    patches = _Patches()
    named_modules = list(named_modules)
    with (
        gc_paused(),
        recursion_room(named_modules),
        entries_compiled_while_patched_dropped(),
        dynamo_tables_of_originals(),
        compiled_code_kept() if functions else nullcontext(),
        model_threads(),
        torch_tracing_unscoped(),  # what torch.export traces is not the program's
        recording_of(book, collect) as recording,
        late_imports_put_back(calls, functions, [m for _, m in named_modules]),  # after patches.undo()
    ):
        plan = patch_plan(calls) if functions else None  # once: each check that it is current reads ~4,000 attributes
        with (
            scripting_sees_originals(None if plan is None else plan.wrappers),  # recorder/torchscript.py
            nullcontext() if plan is None else overrides_tables_naming_wrappers(plan.originals, plan.wrappers),
        ):
            try:
                _install(patches, named_modules, book, recording.sampled, calls, plan)
                yield
            finally:
                patches.undo()
                book.persistent.clear()  # the model's tensors are not kept alive by the profiler


def _install(patches: _Patches, named_modules: list, book: SampleBook, sampled: Any, calls: str, plan: Any) -> None:
    """Put every patch in place; ``plan``: the functions' (wrappers.PatchPlan), None where they are not patched."""
    optimized_type = optimized_module_type()
    functions = plan is not None
    originals, wrappers, by_place = ({}, {}, {}) if plan is None else (plan.originals, plan.wrappers, plan.by_place)
    compiled_roots: list[str] = []
    observed, observed_names = [], []
    bound: list = []  # the patches of attributes bound to their module (recorder/copies.py)
    instances = ScopedInstances()  # for their forwards reached through their classes (recorder/class_forwards.py)
    own_forwards: dict[int, Any] = {}  # the instance forwards the program set, scanned for what they hold
    graph_code = GraphCode(patches, originals, wrappers, by_place)  # recorder/graph_code.py

    def patch_module(module: nn.Module, key: str, value: Any, before: Any = None) -> None:
        patches.set_item(vars(module), key, value, before)
        bound.append(patches.saved[-1])

    for name, module in named_modules:
        if any(root == "" or name.startswith(root + ".") for root in compiled_roots):
            continue  # traced into a compiled module's graphs: a patch would fail its guards
        observed.append(module)
        observed_names.append(name)
        graph_code.name(module)  # before its forward is read
        forward_before = vars(module).get("forward", _MISSING)  # before a read caches a TorchScript method there
        if forward_before is not _MISSING:
            own_forwards[id(module)] = forward_before
        entry = compiled_entry(module, optimized_type)
        scope = MODULE_PREFIX + scope_text(name)
        if entry is not None:
            compiled_roots.append(name)
            attribute, compiled = entry
            namer = scope_namer(COMPILED_REGION_CALL, sampled(COMPILED_REGION_CALL))
            inner = MODULE_PREFIX + scope_text(f"{name}._orig_mod" if name else "_orig_mod")  # its frame's self
            wrapped = optimized_type is not None and isinstance(module, optimized_type)
            frame_module = vars(module)["_modules"]["_orig_mod"] if wrapped else module
            wrapper = compiled_forward(
                compiled, scope, namer, calls == "all", (inner if wrapped else scope, frame_module)
            )
            patch_module(module, attribute, wrapper)
            if attribute == "forward":  # its hooks run around the compiled forward, in torch's _call_impl
                patch_module(module, "_call_impl", call_in_scope_when_hooked(module, scope))
            continue
        wrapper = own_class = None
        if class_forwards.forward_is_data_descriptor(module):  # a property: its class's is scoped instead
            instances.add(module, None, scope, None)
        elif not launches_no_kernel(module) and hasattr(module, "forward"):  # a TorchScript ModuleList has none
            stacks = has_module_stacks(module)
            graph = scoped_graph_forward(module, name, originals, wrappers) if stacks else None
            own_class = graph is None and class_forwards.class_of_its_forward(module, forward_before is _MISSING)
            if folds_into_its_call(module) and functions and isinstance(module.forward, types.MethodType):
                suffix = MODULE_SEPARATOR + scope_text(name)
                wrapper = _folded_forward(module.forward, suffix)
                instances.add(module, wrapper, None, suffix)
            else:
                forward = module.forward
                if functions and calls == "all":  # as stored references are: a forward that is a functional itself
                    forward = held_forward(forward, originals, wrappers)
                wrapper = _module_forward(forward, scope, graph, own_class or None)
                if graph is None:
                    instances.add(module, wrapper, scope, None)
            if not own_class:  # a forward of its class's own is its class's still: its _call_impl calls the wrapper
                patch_module(module, "forward", wrapper, forward_before)
        # after its forward's patch, which it calls where the module has no hooks (recorder/hooked_calls.py)
        if _forward_patch_unseen(module, wrapper, bool(own_class)):
            patch_module(module, "_call_impl", call_in_scope(module, scope))
        else:
            patch_module(module, "_call_impl", call_in_scope_when_hooked(module, scope, wrapper if own_class else None))
    instances.wrapper_codes.add(SCOPE_CODE)  # a hooked module's scope, around torch's _call_impl
    book.remember(t for module in observed for t in (*module.parameters(False), *module.buffers(False)))
    if plan is not None:
        graph_code.at_first_calls([module for _, module in named_modules])
        graph_code.name_compiled()
        for namespace, key, replacement in inductor_kernel_sites(plan.made, named_modules):  # inductor_kernels.py
            patches.set_item(namespace, key, replacement)
        for owner, values in plan.groups:
            patches.set_all(owner, values)
        if calls == "all":
            for owner, key, replacement in stored_reference_sites(observed, originals, wrappers, own_forwards):
                patches.set_item(owner, key, replacement)
        # after the instances captured their forwards, and the scan read the classes' own (their defaults); with
        # functions=False, none: dynamo compiles freely, nothing it guards is patched
        seen_ids = {id(module) for module in observed}
        left_alone = {id(type(module)) for _, module in named_modules if id(module) not in seen_ids}
        left_alone |= {id(owner.target) for owner, *_ in patches.saved if type(owner) is FunctionCode}
        codes, descriptors = class_forward_sites(instances, left_alone)
        for function, global_name, code, class_forward in codes:  # recorder/forward_codes.py
            patches.set_item(function.__globals__, global_name, class_forward)
            patches.set_item(FunctionCode(function), 0, code)
        for kind, replacement in descriptors:
            try:
                patches.set_attribute(kind, "forward", replacement)
            except Exception:  # noqa: BLE001 - a class that refuses it (its metaclass's __setattr__) keeps its own
                pass  # forward: a call through that class stays the caller's, as without these wrappers
    named_observed = zip(observed_names, observed, strict=True)
    held_of = compiled_calls_scoped(patches.saved, named_observed, sampled, calls, patch_module, _MISSING)
    if optimized_type is not None:
        scoped = wrapper_scopes(held_of, _MISSING)
        patches.set_attribute(optimized_type, "__call__", calls_of_wrappers(optimized_type, scoped))
    eval_frame = eval_frame_module()
    if eval_frame is not None:  # torch.compile(model.generate): recorder/compiled_functions.py
        original = vars(eval_frame)["_callback_from_stance"]
        seeing = callback_seeing_compiled_methods(original, held_of, _MISSING)
        patches.set_attribute(eval_frame, "_callback_from_stance", seeing)
    copies_without_patches(patches, bound, _MISSING, {} if plan is None else plan.pickled_as_wrappers)
    defaults_followed()  # the copies the instances call (recorder/forward_codes.py), as their functions are now


def _forward_patch_unseen(module: nn.Module, wrapper: Any, its_class: bool) -> bool:
    """Whether ``module``'s class answers ``forward`` its own way (a ``__getattribute__`` choosing another method),
    so that torch's call never reaches the patched forward ``wrapper`` (None: none was patched), or, ``its_class``,
    the class's forward that ``wrapper`` runs."""
    if wrapper is None or type(module).__getattribute__ is object.__getattribute__:
        return False
    if its_class:
        return True
    try:
        return getattr(module, "forward", None) is not wrapper
    except Exception:  # noqa: BLE001 (the class's own __getattribute__)
        return False
