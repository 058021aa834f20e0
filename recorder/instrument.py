"""Scope annotations around module forwards and calls, for one recording.

Scopes use ``torch._C._profiler._RecordFunctionFast`` (several times cheaper than
``torch.profiler.record_function``: benchmarks/RESULTS.md, "The scope itself"); it appears in the trace as a
``cpu_op`` named exactly like the scope. Names: ``ks.module:<dotted name>`` and
``ks.fn:<call>#<sample id>`` (``ks.fn:<call>`` when samples of that call are not collected). The scope of
a torch.nn module whose forward is one functional call (``nn.Linear``, ``nn.ReLU``…) is folded into that
call's: ``ks.fn:linear#3@encoder.fc``, one scope instead of two (``folds_into_its_call``).

What is patched, all of it put back exactly afterwards (``F.<name>`` is the identical object again,
and a module that had no instance attribute ``forward`` has none):

- module forwards: an instance ``forward`` that opens the module's scope; a ``torch.compile``d module (however
  compiled: ``compiled.compiled_entry``) is scoped as the call ``torch.compile`` and the modules inside it are
  left alone (they are traced into its graphs: patched, they would fail its guards);
- the ``torch.nn.functional`` namespace: every public function, so calls between functionals
  (``F.multi_head_attention_forward`` -> ``F.linear``) are each scoped and the innermost owns its kernels;
- with ``calls="all"`` (recorder/calls.py): torch-level calls outside functionals and functionals held by
  stored references.

A CUDA graph replay gets no scope: the analyzer names its kernels ``torch.cuda.CUDAGraph.replay`` from their
launch (``cudaGraphLaunch``), which the trace holds anyway, when no call scope holds the launch; the enclosing
scopes give its module.
"""

from __future__ import annotations

import gc
import inspect
import sys
import types
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from kernelscope.analyzer.rundir import (
    COMPILED_REGION_CALL,
    FUNCTION_PREFIX,
    MODULE_PREFIX,
    MODULE_SEPARATOR,
    SAMPLE_SEPARATOR,
)
from torch import nn

from .calls import INSIDE_CALL, stored_reference_sites, torch_call_targets
from .compiled import (
    compiled_code_kept,
    compiled_entry,
    compiled_forward,
    dynamo_tracing,
    import_what_the_profiler_imports,
    optimized_module_type,
)
from .samples import SampleBook

_Scope = torch._C._profiler._RecordFunctionFast
_PATCHABLE_MODULES = {F.__name__, "torch", "torch._C._nn"}
_MISSING = object()
_C_FUNCTIONS = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)
CALLS = ("all", "functional")


def functional_names() -> list[str]:
    """Public functions of ``torch.nn.functional`` that get a scope (aitune's rule, so names match)."""
    names = []
    for name, value in vars(F).items():
        if name.startswith("_") or not (inspect.isfunction(value) or inspect.isbuiltin(value)):
            continue
        if getattr(value, "__module__", None) in _PATCHABLE_MODULES:
            names.append(name)
    return names


class _Labels(dict):
    """Sample id -> scope name, built on first use: ``ks.fn:<call>#<id>``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def __missing__(self, sample_id: int) -> str:
        label = self[sample_id] = f"{self.prefix}{sample_id}"
        return label


def _unsampled(args: tuple, kwargs: dict) -> int:
    return 0


def _sample_scopes(name: str, book: SampleBook | None) -> tuple[Any, dict]:
    """``(record, labels)``: ``labels[record(args, kwargs)]`` is a call's scope name. ``record`` counts the
    call's sample when ``book`` is given; otherwise every call has the plain name ``ks.fn:<call>``."""
    plain = FUNCTION_PREFIX + name
    if book is None:
        return _unsampled, {0: plain}
    return book.recorder(name), _Labels(plain + SAMPLE_SEPARATOR)


def _scope_namer(name: str, book: SampleBook | None):
    """A function (args, kwargs) -> scope name, for the calls off the per-call path."""
    record, labels = _sample_scopes(name, book)
    return lambda args, kwargs: labels[record(args, kwargs)]


def _wraps(wrapper: Any, function: Any, name: str) -> Any:
    wrapper.__name__ = getattr(function, "__name__", name)
    wrapper.__qualname__ = getattr(function, "__qualname__", name)
    wrapper.__doc__ = getattr(function, "__doc__", None)
    wrapper.__wrapped__ = function
    return wrapper


def _functional(function: Any, name: str, book: SampleBook | None, torch_calls: bool):
    """A functional's wrapper: always scoped, since functionals nest and the innermost owns kernels.

    ``torch_calls``: torch-level calls are scoped too, so this call must mark itself open for them.
    """
    if torch_calls:
        return _marked_call(function, name, book, outermost_only=False)
    record = labels = None  # made at the first call: most of the ~1400 patched functions are never called
    inside_call, enter_call, leave_call = INSIDE_CALL.get, INSIDE_CALL.set, INSIDE_CALL.reset

    def call_in_scope(*args, **kwargs):
        nonlocal record, labels
        if dynamo_tracing():
            return function(*args, **kwargs)
        if record is None:
            record, labels = _sample_scopes(name, book)
        scope = labels[record(args, kwargs)]
        folded = inside_call()  # "@<module>" in a folded module's forward, before its call (else False)
        if not folded:
            with _Scope(scope):
                return function(*args, **kwargs)
        token = enter_call(False)  # the functionals this call makes are its own, not the module's calls
        try:
            with _Scope(scope + folded):
                return function(*args, **kwargs)
        finally:
            leave_call(token)

    return _wraps(call_in_scope, function, name)


def _torch_call(function: Any, name: str, book: SampleBook | None):
    """A torch-level call's wrapper: scoped only outside any other scoped call (inside a functional,
    ``torch.bmm`` or ``x.view`` are that functional's business)."""
    return _marked_call(function, name, book, outermost_only=True)


def _marked_call(function: Any, name: str, book: SampleBook | None, outermost_only: bool):
    """A scoped call that marks itself open (INSIDE_CALL) for the torch-level calls it makes; with
    ``outermost_only`` it is left unscoped inside another open call.

    A function written in C (``Tensor.mul_``, ``torch.addmm``, ``F.linear``) makes no call the patches see (short
    of a tensor subclass's ``__torch_function__``, whose calls then get scopes of their own), so its wrapper does
    not mark itself open: the ContextVar's set and reset are a noticeable share of what a scoped call costs under
    the profiler (benchmarks/RESULTS.md, "A C function's wrapper marking itself open").

    The call's sample recorder is made at its first call (``book.recorder`` returns the same one to every
    wrapper of a name): making one for each of the patched functions up front costs every recording time for
    functions it never calls, and slowed the recorded pass itself (benchmarks/RESULTS.md, Dead ends).
    """
    record = labels = None
    inside_call, enter_call, leave_call = INSIDE_CALL.get, INSIDE_CALL.set, INSIDE_CALL.reset
    written_in_c = isinstance(function, _C_FUNCTIONS)

    def call_in_scope(*args, **kwargs):
        nonlocal record, labels
        if dynamo_tracing():
            return function(*args, **kwargs)
        state = inside_call()
        if state is True and outermost_only:
            return function(*args, **kwargs)
        if record is None:
            record, labels = _sample_scopes(name, book)
        scope = labels[record(args, kwargs)]
        if state.__class__ is str:  # a folded module's call: its scope is the module's too
            scope += state
        if written_in_c:
            with _Scope(scope):
                return function(*args, **kwargs)
        token = enter_call(True)
        try:
            with _Scope(scope):
                return function(*args, **kwargs)
        finally:
            leave_call(token)

    return _wraps(call_in_scope, function, name)


def _module_forward(forward: Any, scope_name: str):
    def forward_in_scope(*args, **kwargs):
        if dynamo_tracing():
            return forward(*args, **kwargs)
        with _Scope(scope_name):
            return forward(*args, **kwargs)

    return forward_in_scope


def _folded_forward(forward: Any, module_suffix: str):
    """The forward of a module whose scope is folded into its call's (``folds_into_its_call``): no scope of
    its own; the call made inside names the module after its own name (``ks.fn:linear#3@encoder.fc``)."""
    enter_call, leave_call = INSIDE_CALL.set, INSIDE_CALL.reset

    def forward_in_call_scope(*args, **kwargs):
        if dynamo_tracing():
            return forward(*args, **kwargs)
        token = enter_call(module_suffix)
        try:
            return forward(*args, **kwargs)
        finally:
            leave_call(token)

    return forward_in_call_scope


_DROPOUTS = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)


def launches_no_kernel(module: nn.Module) -> bool:
    """Modules whose forward launches no kernel of its own get no scope (it would cost a scope per call and
    own no row): ``nn.Identity``; dropout modules in eval mode, whose functional returns its input; and the
    modules that only call their children (``only_calls_its_children``)."""
    kind = type(module)
    return kind is nn.Identity or (kind in _DROPOUTS and not module.training) or only_calls_its_children(module)


def only_calls_its_children(module: nn.Module) -> bool:
    """``nn.Sequential``, whose forward only calls its children (each scoped), unless a hook on a child
    could launch kernels inside it."""
    if type(module) is not nn.Sequential:
        return False
    return not (_global_forward_hooks() or any(_has_forward_hooks(child) for child in module.children()))


def _has_forward_hooks(module: nn.Module) -> bool:
    return bool(module._forward_hooks or module._forward_pre_hooks)


def _global_forward_hooks() -> bool:
    hooks = sys.modules["torch.nn.modules.module"]
    return bool(hooks._global_forward_hooks or hooks._global_forward_pre_hooks)


# torch.nn classes whose forward is exactly one functional call and nothing that launches a kernel besides
# (torch's own code: the exact class, not a subclass): a functional is scoped in every mode, so the module's
# scope folds into its call's, one scope instead of two. Conv: only with padding_mode "zeros" (else F.pad
# first); batch norm: only in eval mode (in training it also counts its batches with Tensor.add_).
_SINGLE_CALL = {
    nn.Linear, nn.Bilinear, nn.Embedding, nn.LayerNorm, nn.RMSNorm, nn.GroupNorm, nn.LocalResponseNorm,
    nn.ReLU, nn.ReLU6, nn.GELU, nn.SiLU, nn.Mish, nn.ELU, nn.LeakyReLU, nn.Hardtanh, nn.Hardswish,
    nn.Hardsigmoid, nn.GLU, nn.Softplus, nn.Softmax, nn.LogSoftmax,
    nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d,
    nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d, nn.Upsample, nn.PixelShuffle,
    *_DROPOUTS,
}  # fmt: skip
_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def folds_into_its_call(module: nn.Module) -> bool:
    """Whether the module's scope is folded into the scope of the one functional call its forward makes."""
    kind = type(module)
    if "forward" in vars(module) or module._modules:  # a forward set on the instance is not torch's
        return False
    if kind in _CONVS:
        return module.padding_mode == "zeros"
    if kind in _BATCH_NORMS:
        return not module.training
    return kind in _SINGLE_CALL


class _Patches:
    """Attribute replacements on dicts and classes, undone in reverse order, exactly."""

    def __init__(self) -> None:
        self.saved: list[tuple[Any, str, Any]] = []

    def set_item(self, owner: dict, key: str, value: Any) -> None:
        self.saved.append((owner, key, owner.get(key, _MISSING)))
        owner[key] = value

    def set_attribute(self, owner: Any, key: str, value: Any) -> None:
        """For classes and modules, whose ``__dict__`` cannot be written directly (classes) or is
        written like any other (modules)."""
        self.saved.append((owner, key, vars(owner).get(key, _MISSING)))
        setattr(owner, key, value)

    def undo(self) -> None:
        while self.saved:
            owner, key, before = self.saved.pop()
            if isinstance(owner, dict):
                if before is _MISSING:
                    owner.pop(key, None)
                else:
                    owner[key] = before
            elif before is _MISSING:
                delattr(owner, key)
            else:
                setattr(owner, key, before)


@contextmanager
def instrumented(
    named_modules: Iterable[tuple[str, nn.Module]],
    book: SampleBook,
    collect: set[str] | None,
    calls: str = "all",
    functions: bool = True,
) -> Iterator[None]:
    """Scopes on every module forward and call for the duration of the block.

    ``collect``: names whose samples go to ``book`` (None = all). ``calls``: ``"all"`` or ``"functional"``
    (only the ``torch.nn.functional`` namespace, as aitune's profiler sees it). With the functions patched,
    torch.compile'd code runs what it compiled before (``compiled.compiled_code_kept``). ``functions=False``:
    only module forwards and compiled modules get scopes, and dynamo compiles freely (nothing it guards is
    patched): profile()'s way out when compiled code cannot be kept.
    """
    if calls not in CALLS:
        raise ValueError(f"calls must be one of {CALLS}, not {calls!r}")

    def sampled(name: str) -> SampleBook | None:
        return book if collect is None or name in collect else None

    import_what_the_profiler_imports()
    patches = _Patches()
    with _gc_paused(), compiled_code_kept() if functions else nullcontext():
        try:
            _install(patches, list(named_modules), book, sampled, calls, functions)
            yield
        finally:
            patches.undo()
            book.persistent.clear()  # the model's tensors are not kept alive by the profiler


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector is paused while the scopes are in place. The ~1400 wrappers made at
    once, and the samples kept during the pass, would set off full collections of the process's objects
    (slow with torch loaded) inside the measured pass."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _install(
    patches: _Patches, named_modules: list, book: SampleBook, sampled: Any, calls: str, functions: bool = True
) -> None:
    optimized_type = optimized_module_type()
    compiled_roots: list[str] = []
    observed = []
    for name, module in named_modules:
        if any(root == "" or name.startswith(root + ".") for root in compiled_roots):
            continue  # traced into a compiled module's graphs: a patch would fail its guards
        observed.append(module)
        entry = compiled_entry(module, optimized_type)
        if entry is not None:
            compiled_roots.append(name)
            attribute, compiled = entry
            namer = _scope_namer(COMPILED_REGION_CALL, sampled(COMPILED_REGION_CALL))
            wrapper = compiled_forward(compiled, MODULE_PREFIX + name, namer, marks_its_calls=calls == "all")
            patches.set_item(vars(module), attribute, wrapper)
            continue
        if launches_no_kernel(module):
            continue
        if folds_into_its_call(module) and functions:
            wrapper = _folded_forward(module.forward, MODULE_SEPARATOR + name)
        else:
            wrapper = _module_forward(module.forward, MODULE_PREFIX + name)
        patches.set_item(vars(module), "forward", wrapper)
    book.remember(t for module in observed for t in (*module.parameters(False), *module.buffers(False)))
    if not functions:
        return

    wrappers: dict[int, Any] = {}  # id(original) -> its wrapper, for stored references
    originals: dict[int, Any] = {}
    for name in functional_names():
        function = getattr(F, name)
        wrapper = wrappers.get(id(function)) or _functional(function, name, sampled(name), calls == "all")
        wrappers[id(function)], originals[id(function)] = wrapper, function
        patches.set_item(vars(F), name, wrapper)
    if calls == "all":
        for owner, attribute, name in torch_call_targets():
            function = getattr(owner, attribute)
            wrapper = wrappers.get(id(function))  # torch.conv2d is F.conv2d: keep the functional's name
            if wrapper is None:
                wrapper = _torch_call(function, name, sampled(name))
                wrappers[id(function)], originals[id(function)] = wrapper, function
            patches.set_attribute(owner, attribute, wrapper)
        for owner, key, original in stored_reference_sites(observed, originals):
            patches.set_item(owner, key, wrappers[id(original)])
