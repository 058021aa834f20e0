"""Scopes for the calls the ``torch.nn.functional`` namespace patch does not reach.

With ``calls="all"``, during one recording:

- torch-level calls made outside any functional call get a scope (and a sample) under a dotted
  name: ``torch.<name>`` (``torch.addmm``, ``torch.cat``…), ``torch.linalg.<name>``, ``torch.fft.<name>``,
  ``torch.special.<name>``, ``torch.sparse.<name>`` (``torch.sparse.mm``), the attention functions of
  ``torch.nn.attention`` (``torch.nn.attention.flex_attention.flex_attention``), and
  ``Tensor.<method>`` for Tensor methods and operators (``x + y`` is ``Tensor.__add__``, ``x.add(y)``
  is ``Tensor.add``). Functional names never contain a dot, so the two cannot collide. A torch
  function that *is* a functional (``torch.conv2d is F.conv2d``) keeps the functional's name.
- the collectives of ``torch.distributed`` (``torch.distributed.all_reduce``…), where it is available: their
  kernels (NCCL's, on their own streams) are then the collective's, inside the module that called it.
- Triton kernels launched by hand (``kernel[grid](...)``: ``triton.runtime.jit.JITFunction.run``), where the
  program has imported Triton: ``triton.<kernel>`` after the ``@triton.jit`` function's name. No torch operator
  launches them, so without this their kernels would have a module and no call. Inductor's kernels do not go
  through ``JITFunction.run`` (they are a compiled region's).
- the calls of a loaded AOTInductor package (``torch._inductor.aoti_load_package(path)(x)``), where the program has
  loaded one: ``AOTICompiledModel.__call__``. Its generated code launches its kernels from C++, where no torch
  operator holds them, so without this their kernels would have a module and no call (on the CPU its kernels leave
  no event, and its rows were named after the few ATen operators its code calls).
- ``torch.autograd.Function`` subclasses of the program's own or a library's (``MatMul4Bit.apply(...)``; not torch's
  own): ``<Function>.apply``, which extension code uses to wrap kernels that no torch operator launches. Unlike
  the other torch-level calls it does not hold the calls it makes: a torch call or functional inside it has its own
  scope, so only what nothing inside names (a kernel launched by the extension itself) is the Function's.
- functionals reached through a stored reference (``self.act = F.gelu``, a module-level
  ``from torch.nn.functional import gelu`` in the model's own code, a registry of activations, a
  ``functools.partial``, a default argument) get their functional's scope: where they are held is
  patched like the namespace (recorder/stored_references.py).

All of it is plain attribute patching, so it costs nothing for calls that are not patched (metadata
reads such as ``x.shape`` and views such as ``x.view``), and it works on every thread. A
``TorchFunctionMode`` would see every call by identity but costs a Python dispatch per torch call,
enough for an empty mode alone to slow the profiled pass (benchmarks/RESULTS.md, "The scope itself").
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import inspect
import sys
import types
from operator import is_
from threading import get_ident, main_thread
from typing import Any

import torch

NO_KERNEL_METHODS = frozenset(
    "size dim ndimension numel nelement stride storage_offset is_contiguous data_ptr element_size get_device "
    "is_floating_point is_complex is_signed is_nonzero is_same_size is_set_to is_pinned is_shared is_inference "
    "view view_as transpose permute t unsqueeze squeeze expand expand_as as_strided detach detach_ narrow select "
    "unbind split split_with_sizes chunk tensor_split unflatten movedim moveaxis swapaxes swapdims adjoint "
    "requires_grad_ dim_order untyped_storage storage storage_type type_as new backward register_hook "
    "register_post_accumulate_grad_hook retain_grad share_memory_ module_load reinforce tolist numpy "
    "is_coalesced dense_dim sparse_dim has_names refine_names rename rename_ align_to align_as "
    "get_num_threads set_num_threads get_default_dtype is_grad_enabled is_tensor is_storage".split()
)
OPERATORS = (
    "__add__ __radd__ __iadd__ __sub__ __rsub__ __isub__ __mul__ __rmul__ __imul__ __truediv__ __rtruediv__ "
    "__itruediv__ __div__ __idiv__ __floordiv__ __rfloordiv__ __ifloordiv__ __mod__ __rmod__ __imod__ __pow__ "
    "__rpow__ __ipow__ __matmul__ __rmatmul__ __and__ __rand__ __iand__ __or__ __ror__ __ior__ __xor__ __rxor__ "
    "__ixor__ __lshift__ __rlshift__ __ilshift__ __rshift__ __rrshift__ __irshift__ __invert__ __neg__ __pos__ "
    "__abs__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __getitem__ __setitem__ __bool__ __float__ __int__"
).split()
_NAMESPACES = (  # (namespace, the prefix of its calls' names, the modules of the functions patched there)
    (torch, "torch", ("torch._C._VariableFunctions",)),
    (torch.linalg, "torch.linalg", ("torch._C._linalg",)),
    (torch.fft, "torch.fft", ("torch._C._fft",)),
    (torch.special, "torch.special", ("torch._C._special",)),
    (torch.sparse, "torch.sparse", ("torch._C._sparse", "torch.sparse")),  # torch.sparse.sum is Python
)


def _attention_namespaces() -> tuple:
    """The Python modules of ``torch.nn.attention``'s attention functions (``flex_attention``, ``varlen_attn``), as
    namespaces of their own functions, where this torch has them: their kernels were named after the calls they
    make inside (``torch.compile``, a score_mod's ``Tensor.__add__``)."""
    found = []
    for name in ("torch.nn.attention.flex_attention", "torch.nn.attention.varlen"):
        try:
            found.append((importlib.import_module(name), name, (name,)))
        except ImportError:  # a torch older than the function
            continue
    return tuple(found)


_NAMESPACES += _attention_namespaces()

COLLECTIVES = (
    "all_reduce all_gather all_gather_into_tensor all_gather_object all_to_all all_to_all_single broadcast "
    "reduce reduce_scatter reduce_scatter_tensor gather scatter send recv isend irecv batch_isend_irecv barrier"
).split()


TRITON_LAUNCH = "triton"  # the target name of JITFunction.run: its calls are named triton.<kernel>
AOTI_CALL = "AOTICompiledModel.__call__"  # the name of a loaded AOTInductor package's calls
AUTOGRAD_APPLY = "apply"  # the target name of torch.autograd.Function.apply: its calls are named <Function>.apply


def aoti_compiled_model() -> type | None:
    """The class of loaded AOTInductor packages where the program has loaded one (never imported here); torch
    moved it from ``torch._inductor.package.package`` to ``torch.export.pt2_archive._package``."""
    for module in ("torch.export.pt2_archive._package", "torch._inductor.package.package"):
        kind = getattr(sys.modules.get(module), "AOTICompiledModel", None)
        if isinstance(kind, type) and inspect.isfunction(vars(kind).get("__call__")):
            return kind
    return None


def triton_jit_function() -> type | None:
    """Triton's ``JITFunction`` class where the program has imported Triton (it is never imported here: a
    program that launches Triton kernels has)."""
    jit = sys.modules.get("triton.runtime.jit")
    kind = getattr(jit, "JITFunction", None)
    return kind if isinstance(kind, type) and inspect.isfunction(vars(kind).get("run")) else None


# True while a functional, torch-level or compiled call is open: the torch-level calls it makes are its own.
# Inside the forward of a module folded into its call (instrument.folds_into_its_call), before that call: the
# suffix "@<module name>" that the call's scope name takes. False outside calls, on a thread the recording scopes;
# OTHER_THREAD (the default) on any other (recorder/threads.py), whose calls the wrappers leave alone. A ContextVar
# is per thread (a thread starts in a fresh context) and its set/reset cost about half of a threading.local
# counter's update, on the per-call path.
OTHER_THREAD: Any = object()
INSIDE_CALL: contextvars.ContextVar[Any] = contextvars.ContextVar("kernelscope_inside_call", default=OTHER_THREAD)
# get_ident() of the threads the recording scopes (recorder/threads.py): OTHER_THREAD is read on one of them too in a
# context made before the recording, which the model saved and runs code in (contextvars.Context.run), where every
# variable holds what it held then.
SCOPED_THREADS: set[int] = set()
# The key that each scoped thread holds among torch's thread-local Python objects, which torch hands to the threads
# that run its work (autograd's device threads, for the graph tasks of the backwards it runs). A torch that can take
# a key away again (torch._C._remove_obj_from_tls, 2.12 on) removes it when the thread is unscoped; an older one
# cannot, and a key left at a thread's exit can deadlock it, so there only the main thread holds the key (its
# thread-locals end after the interpreter), set to False when unscoped.
SCOPED_KEY = "kernelscope_scoped_thread"
STASHES_KEY = all(hasattr(torch._C, name) for name in ("_stash_obj_in_tls", "_is_key_in_tls", "_get_obj_in_tls"))
REMOVES_KEY = STASHES_KEY and hasattr(torch._C, "_remove_obj_from_tls")
_is_key_in_tls = torch._C._is_key_in_tls if STASHES_KEY else lambda key: False
_get_obj_in_tls = torch._C._get_obj_in_tls if STASHES_KEY else lambda key: None


def on_other_thread() -> bool:
    """Where INSIDE_CALL reads OTHER_THREAD: whether this is a thread the recording leaves alone, not one it scopes
    running code in a context made before the recording, nor a torch thread running a scoped thread's work (such as
    a backward it runs), which are then outside calls, as INSIDE_CALL False."""
    return get_ident() not in SCOPED_THREADS and not (
        _is_key_in_tls(SCOPED_KEY) and _get_obj_in_tls(SCOPED_KEY) is True
    )


def scope_this_thread() -> None:
    """Mark the calling thread as one the recording scopes, for its own calls and the work torch runs for it."""
    SCOPED_THREADS.add(get_ident())
    if REMOVES_KEY or STASHES_KEY and get_ident() == main_thread().ident:
        torch._C._stash_obj_in_tls(SCOPED_KEY, True)


def unscope_this_thread() -> None:
    SCOPED_THREADS.discard(get_ident())
    if REMOVES_KEY:
        torch._C._remove_obj_from_tls(SCOPED_KEY)
    elif STASHES_KEY and get_ident() == main_thread().ident:
        torch._C._stash_obj_in_tls(SCOPED_KEY, False)


_chosen: tuple[list, list] | None = None  # (attributes_state() when chosen, the targets chosen)


def _is_op(value: Any) -> bool:
    return isinstance(value, types.BuiltinFunctionType) or inspect.isfunction(value)


def bound_by_a_library(value: Any) -> bool:
    """Whether ``value``, a public attribute of one of torch's namespaces, is a callable a library bound there in place
    of torch's before the recording (``torch.matmul = fast_matmul``, ``F.scaled_dot_product_attention = sageattn``,
    ``F.gelu = partial(F.gelu, approximate="tanh")``, an object with ``__call__``), which is scoped by the name it is
    called by, as torch's would be. Not torch's own helpers (``torch.functional``, ``torch.random``…) nor Python's
    (``typing.Optional`` in ``torch.nn.functional``, ``len``); a package whose name only begins with 'torch'
    (torchao, torchtune) is a library. Read by the value's type alone where it is not a function."""
    if issubclass(type(value), functools.partial):
        return True
    if issubclass(type(value), (types.FunctionType, types.BuiltinFunctionType)):
        module = getattr(value, "__module__", None)
    elif issubclass(type(value), (type, types.ModuleType)) or not callable(value):
        return False
    else:
        module = getattr(type(value), "__module__", None)
    return type(module) is str and module.partition(".")[0] not in _NOT_A_LIBRARY


_NOT_A_LIBRARY = frozenset(("torch", "builtins", "functools", "typing", "collections", "abc"))  # top-level packages


def torch_call_targets() -> list[tuple[Any, str, str]]:
    """(owner, attribute, call name) of every torch-level call to patch, in a stable order.

    Chosen again only when an attribute of the namespaces, torch.distributed or Tensor's classes is no longer the
    object it was (the choice reads nothing else): choosing reads their ~4000 attributes, which cost more than
    patching them."""
    global _chosen
    owners = watched_owners()
    if _chosen is None or not attributes_unchanged(_chosen[0], owners):
        _chosen = (attributes_state(owners), _choose_targets())
    return list(_chosen[1])


def watched_owners() -> list[Any]:
    """Every owner of the attributes that _choose_targets reads that can change: the namespaces, torch.distributed,
    Triton's JITFunction and AOTInductor's AOTICompiledModel (once imported), torch.autograd.Function, and each
    class of Tensor's method resolution order (which dir() and getattr_static read); torch._C._VariableFunctions's
    are read-only."""
    owners = [namespace for namespace, _prefix, _modules in _NAMESPACES] + list(torch.Tensor.__mro__)
    owners.append(torch.autograd.function.Function)
    if torch.distributed.is_available():
        owners.append(torch.distributed)
    for kind in (triton_jit_function(), aoti_compiled_model()):
        if kind is not None:
            owners.append(kind)
    return owners


def attributes_state(owners: list[Any]) -> list[tuple[Any, list[str], list[Any]]]:
    """``(owner, names, values)`` of each owner's attributes: the values are held, so that no other object can take
    one of their ids (``attributes_unchanged`` compares identities) while the state is kept."""
    return [(owner, list(vars(owner)), list(vars(owner).values())) for owner in owners]


def attributes_unchanged(state: list[tuple[Any, list[str], list[Any]]], owners: list[Any]) -> bool:
    """Whether ``owners`` are the owners of ``state`` and hold the same attribute names, each the identical object
    (``operator.is_`` in C, as C code compares them: half the time of comparing lists of ids, ~3,000 attributes a
    recording)."""
    return len(state) == len(owners) and all(
        owner is now and list(vars(now)) == names and all(map(is_, vars(now).values(), values))
        for (owner, names, values), now in zip(state, owners, strict=True)
    )


def _choose_targets() -> list[tuple[Any, str, str]]:
    targets = []
    variable_functions = torch._C._VariableFunctions
    for namespace, prefix, modules in _NAMESPACES:
        for attribute, value in vars(namespace).items():
            if attribute.startswith("_") or attribute in NO_KERNEL_METHODS:
                continue
            library = bound_by_a_library(value)
            if not library and not _is_op(value):
                continue
            module = getattr(value, "__module__", None)
            is_aten = getattr(variable_functions, attribute, None) is value if namespace is torch else module in modules
            if is_aten or module == "torch.functional" and namespace is torch or library:
                targets.append((namespace, attribute, f"{prefix}.{attribute}"))
    distributed = torch.distributed
    if distributed.is_available():
        for attribute in COLLECTIVES:
            if inspect.isfunction(getattr(distributed, attribute, None)):
                targets.append((distributed, attribute, f"torch.distributed.{attribute}"))
    jit_function = triton_jit_function()
    if jit_function is not None:
        targets.append((jit_function, "run", TRITON_LAUNCH))
    package = aoti_compiled_model()
    if package is not None:
        targets.append((package, "__call__", AOTI_CALL))
    targets.append((torch.autograd.function.Function, "apply", AUTOGRAD_APPLY))
    tensor = torch.Tensor
    for attribute in sorted(set(dir(tensor))):
        if attribute in NO_KERNEL_METHODS:
            continue
        if attribute.startswith("_") and attribute not in OPERATORS:
            continue
        value = inspect.getattr_static(tensor, attribute)
        if inspect.ismethoddescriptor(value) or inspect.isfunction(value):
            targets.append((tensor, attribute, f"Tensor.{attribute}"))
    return targets


def patched_functions(plan: Any, owner: Any) -> list[tuple[str, Any]]:
    """``(attribute, original)`` for each attribute of ``owner`` that ``plan`` (wrappers.PatchPlan) patches."""
    original_of = plan.by_wrapper[1]
    held = [group for patched, group in plan.groups if patched is owner]
    return [(name, original_of[id(wrapper)]) for group in held for name, wrapper in group.items()]
