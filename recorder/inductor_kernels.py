"""The kernels of inductor's compiled code named like eager ones: each kernel a compiled graph launches, in the module
and under the call of the model's code it was generated from, where inductor's record of it says so exactly.

inductor writes, above each Triton kernel it defines and each extern kernel it calls in a graph's wrapper code
(``extern_kernels.addmm``, ``buf1 = extern_kernels.convolution(...)``, an ATen fallback such as
``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(...)``), the nodes of dynamo's graph that kernel
computes ("Source Nodes: [linear_1]"); dynamo's graph, which the compiled function keeps (aot_autograd's
``forward.zero_grad`` is bound to it), says of each node the module it ran in (``nn_module_stack``: a path under the
compiled frame's local that holds it, ``L['self'].fc1``, ``L['fn'].0``) and the torch call it is. While recorded, the
wrapper module's globals for those kernels are ones that open that module's and call's scopes around the launch, the
module's under the compiled module whose call runs now (one graph serves every instance of a class): the code that
runs is the wrapper's own, calling the same kernels, and the globals are put back afterwards.

- A Triton kernel of several calls (a fusion of ``relu`` and ``add``) gets the module all of them ran in, and stays
  the call ``torch.compile``'s; an extern kernel is the last of its source nodes (the earlier ones made its inputs).
- A C++ kernel (``cpp_fused_add_relu_0``, on the CPU) has no such comment, and leaves no event in the trace: it runs
  inside an operator range of its own name while recorded, so its time is a row of its own, the call
  ``torch.compile``'s, not the graph's call operator's; where ``torch._inductor.config.trace.provenance_tracking_level``
  was set when inductor compiled it, the compiled graph's provenance mapping says its nodes (post-grad nodes, each
  from nodes of dynamo's graph), and it gets their scopes as a Triton kernel does.
- The nodes are those of the graph whose compiled function runs the kernel, and the paths under the ``self`` of the
  frame whose compiled entry calls it (while recorded, the function in that frame's globals, ``__compiled_fn_<n>``, is
  one that notes both around the call, put back afterwards): a graph break in a submodule's forward makes that forward a
  compiled frame of its own, and inductor shares one wrapper module among graphs it compiled alike (its cache's key is
  their ATen graph), whose comments name the nodes of the graph compiled first: a name the running graph lacks names
  nothing.
- A node run by a compiled function outside any module (``torch.compile(fn)``) is the call of whatever module
  calls it; a node of a module the function was handed (``L['layers'].1``) is that module's where it is one of the
  recorded model's (by identity) and no compiled module's call is around; elsewhere such a node, or one of a module
  under a compiled frame whose module is not known here, names neither: not exact.
- What runs without the wrapper code (a CUDA graph's replay under ``mode="reduce-overhead"``) stays
  ``torch.compile``'s, as do kernels whose source nodes name no module or call known here.
"""

from __future__ import annotations

import contextvars
import os
import re
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

import torch
from kernelscope.analyzer.rundir import FUNCTION_PREFIX, MODULE_PREFIX, scope_text

from .calls import INSIDE_CALL, OTHER_THREAD, on_other_thread
from .compiled import COMPILED_MODULE_SCOPE
from .compiled_graphs import compiled_functions_and_entries, values_in_closures
from .graph_nodes import SELF, is_compiled_graph, nodes_by_source_name, provenance_origins
from .scope_gate import OPEN as scopes_open

_Scope = torch._C._profiler._RecordFunctionFast
_ORIGINS = re.compile(r"^\s*# (?:Topologically Sorted|Unsorted) Source Nodes: \[([^\]]*)\], Original ATen:")
_DEFINED = re.compile(r"^(\w+) = async_compile\.(\w+)\(")
# a call of an extern kernel or an ATen fallback, its result assigned or not: the global it reads is its group
_EXTERN_CALL = re.compile(r"^\s*(?:\w+(?:\s*,\s*\w+)*\s*=\s*)?(?:(extern_kernels)\.\w+|(torch)\.ops(?:\.\w+)+)\(")
# While a compiled function whose graphs inductor compiled runs: the nodes of its graph, its frame's locals that the
# nodes' module paths start from (by name), and the key of both that resolved scopes are kept under
_RUNNING: contextvars.ContextVar[tuple | None] = contextvars.ContextVar("ks_inductor_graph", default=None)
# Made with the sites: the scopes of a graph's nodes by their names under a frame's self, and, by id of a compiled
# frames' self, the paths of the modules under it
_RESOLVED: dict[tuple, tuple] = {}
_PATHS: dict[int, dict[int, str | None]] = {}
# The recorded model's module paths by id (the recording's own names), for frames no compiled module's call is around
_RECORDED_PATHS: dict[int, str | None] = {}
_NO_SELF = object()  # a frame with no self, or not a compiled entry's
_SOURCE_PARTS = re.compile(r"([LG])\['(\w+)'\]|\[(\d+)\]|\['([^']*)'\]")  # a source's base and its items


def inductor_kernel_sites(
    made: Iterable[tuple[str, str, int]], named_modules: Iterable[tuple[str, Any]] = ()
) -> list[tuple[dict, str, Any]]:
    """``(namespace, global name, replacement)`` for the kernels of every inductor graph compiled code alive now
    runs. ``made``: the patch plan's keys ``(kind, call name, id(original))``; ``named_modules``: the recorded
    model's modules by the names the recording gives them."""
    for made_before in (_RESOLVED, _PATHS, _RECORDED_PATHS):
        made_before.clear()
    for name, module in named_modules:
        _RECORDED_PATHS[id(module)] = name if id(module) not in _RECORDED_PATHS else None
    call_names = {key[2]: key[1] for key in made}
    known = set(call_names.values())
    sites: list[tuple[dict, str, Any]] = []
    seen: set[int] = set()
    for function, callers, homes in compiled_functions_and_entries():
        try:
            sites += _function_sites(function, callers, homes, call_names, known, seen)
        except Exception:  # noqa: BLE001 - objects of another torch's shape: its kernels stay torch.compile's
            continue
    return sites


def _function_sites(
    function: Any, callers: set, homes: list, call_names: dict, known: set, seen: set[int]
) -> list[tuple[dict, str, Any]]:
    """The sites of the inductor graphs one compiled function runs (none where it runs no inductor graph), and the
    function itself where the entries' code (``callers``) reads it (``homes``: ``(globals, name)``), which notes its
    graph's nodes and its frame's ``self`` while it runs: inductor shares one wrapper module among the graphs it
    compiled alike (its cache's key is their ATen graph), so a kernel's source nodes are read in the graph that runs
    it."""
    bound = vars(function).get("zero_grad") if type(function) is types.FunctionType else None
    graph_module = getattr(bound, "__self__", None)
    if not isinstance(graph_module, torch.fx.GraphModule):
        return []
    nodes = nodes_by_source_name(graph_module.graph.nodes, call_names, known)
    graphs = values_in_closures(function, is_compiled_graph)
    if not graphs:  # a function of no inductor graph (aot_eager's) is left alone
        return []
    sites: list[tuple[dict, str, Any]] = [(home, name, _in_its_frame(function, nodes, callers)) for home, name in homes]
    for graph in graphs:
        runs = getattr(graph, "current_callable", None)
        namespace = getattr(getattr(runs, "__func__", runs), "__globals__", None)
        if isinstance(namespace, dict) and id(namespace) not in seen:
            seen.add(id(namespace))
            provenance = provenance_origins(getattr(graph, "inductor_provenance_mapping_str", None))
            sites += _kernel_sites(getattr(graph, "source_code", "") or "", namespace, provenance)
    return sites


def _kernel_sites(source: str, namespace: dict, provenance: dict) -> list[tuple[dict, str, Any]]:
    """The globals of one wrapper module (``namespace``, from ``source``) to replace, by its origin comments and, for
    its C++ kernels, ``provenance`` (``provenance_origins``)."""
    sites: list[tuple[dict, str, Any]] = []
    extern_lines: dict[str, dict[int, tuple]] = {}  # the global a call reads -> its line number -> its source nodes
    origins: tuple[str, ...] = ()
    for number, line in enumerate(source.splitlines(), 1):
        found = _ORIGINS.match(line)
        if found:
            origins = tuple(name.strip() for name in found.group(1).split(",") if name.strip())
            continue
        if not line.strip() or line.lstrip().startswith("#"):  # the comments that follow it: its mapping, its path
            continue
        defined = _DEFINED.match(line)
        if defined and defined.group(2) == "cpp_pybinding" and callable(namespace.get(defined.group(1))):
            name = defined.group(1)
            sites.append((namespace, name, _ranged(namespace[name], name, origins or provenance.get(name, ()))))
        elif origins and defined and hasattr(namespace.get(defined.group(1)), "run"):
            sites.append((namespace, defined.group(1), _ScopedLaunches(namespace[defined.group(1)], origins)))
        elif origins and (called := _EXTERN_CALL.match(line)):
            extern_lines.setdefault(called.group(1) or called.group(2), {})[number] = origins[-1:]
        origins = ()
    for name, lines in extern_lines.items():
        held = namespace.get(name)
        if name == "extern_kernels" and held is not None:
            sites.append((namespace, name, _ScopedExterns(held, lines, namespace.get("__file__"))))
        elif name == "torch" and held is torch:
            sites.append((namespace, name, _ScopedTorch(lines, namespace.get("__file__"))))
    return sites


def _scopes(origins: Iterable[str], nodes: dict, under: Callable[[str], str | None]) -> tuple[str | None, str | None]:
    """(the module all the nodes ``origins`` ran in, its path the one ``under`` gives the frame's local its module is
    under, followed by the module's path under that local's; their call where they are one call), or () where neither
    is known."""
    found = [nodes.get(name, (None, "", None)) for name in origins]
    bases = {local: under(local) if local is not None else None for local, _, _ in found}
    modules = {
        ".".join(filter(None, (bases[local], module))) if bases[local] is not None else None
        for local, module, _ in found
    }
    calls = {call for _, _, call in found}
    if not found or None in modules:  # a node of a module not under the frame's: where it ran is not known here
        return ()
    call = calls.pop() if len(calls) == 1 and None not in calls else None
    module = ".".join(os.path.commonprefix([m.split(".") if m else [] for m in modules]))  # by whole names
    return () if module == "" and call is None else (module, call)


def _recorded() -> bool:
    """Whether a launch now opens scopes: the profiler's pass has started, on one of the model's threads."""
    return scopes_open[0] and not (INSIDE_CALL.get() is OTHER_THREAD and on_other_thread())


def _in_scopes(origins: tuple, run: Callable, args: tuple, kwargs: dict, name: str | None = None) -> Any:
    """``run(*args, **kwargs)`` in the scopes of the source nodes ``origins`` of the graph running it and an operator
    range ``name``, while recorded."""
    if not _recorded():
        return run(*args, **kwargs)
    names = []
    root = COMPILED_MODULE_SCOPE.get()
    resolved = (_resolved(origins, root) if origins else ()) or ("", None)
    module, call = resolved[:2]
    root = resolved[2] if len(resolved) > 2 else root  # the scope its path is under, where _resolved says one
    if module and root is not None:
        names.append(root[0] + ("." if root[0] != MODULE_PREFIX else "") + scope_text(module))
    if call is not None and (root is not None or not module):  # a module under a frame's self that is not known
        names.append(FUNCTION_PREFIX + scope_text(call))
    if name is not None:
        names.append(name)
    opened = [_Scope(scope) for scope in names]
    for scope in opened:
        scope.__enter__()
    try:
        return run(*args, **kwargs)
    finally:
        for scope in reversed(opened):
            scope.__exit__(None, None, None)


def _in_its_frame(function: Callable, nodes: dict, callers: set) -> Callable:
    """``function`` (a compiled function) noting, while recorded, the nodes of its graph and the locals (or globals,
    ``G['name']``) their modules are under in the frame that calls it, its compiled entry's (none where another calls
    it)."""
    read = {local for local, _, _ in nodes.values() if local is not None}
    locals_read = tuple(sorted(local for local in read if not local.endswith("]")))
    sources_read = tuple(sorted(local for local in read if local.endswith("]")))  # G['ENC'], L['mods']['enc']

    def graph_in_its_frame(*args: Any, **kwargs: Any) -> Any:
        if not _recorded():
            return function(*args, **kwargs)
        frame = sys._getframe(1)
        values = frame.f_locals if frame.f_code in callers else {}
        owners = {local: values.get(local, _NO_SELF) for local in locals_read}
        if sources_read:
            entry = frame.f_code in callers
            owners.update((source, _source_value(frame, source) if entry else _NO_SELF) for source in sources_read)
        token = _RUNNING.set((nodes, owners, (id(nodes), *map(id, owners.values()))))  # the key made once a graph call
        try:
            return function(*args, **kwargs)
        finally:
            _RUNNING.reset(token)

    graph_in_its_frame.__dict__.update(vars(function))  # aot_autograd's attributes (its zero_grad), as they were
    graph_in_its_frame.__wrapped__ = function
    return graph_in_its_frame


def _source_value(frame: Any, source: str) -> Any:
    """What dynamo's ``source`` of a module (``G['ENC']``, ``L['mods']['enc']``, ``G['ENCS'][0]``) is in ``frame``:
    its locals' or globals' value, through items of plain dicts, lists and tuples only (no code of the model's)."""
    value = _NO_SELF
    for scope, name, index, key in _SOURCE_PARTS.findall(source):
        if scope:
            value = (frame.f_locals if scope == "L" else frame.f_globals).get(name, _NO_SELF)
        elif index and type(value) in (list, tuple) and int(index) < len(value):
            value = value[int(index)]
        elif not index and type(value) is dict:
            value = value.get(key, _NO_SELF)
        else:
            return _NO_SELF
    return value


def _resolved(origins: tuple, root: tuple | None) -> tuple:
    """(module, call) of the nodes ``origins`` of the graph that runs now (``_scopes``), its module under the self of
    ``root``'s compiled frames (a graph break in a submodule's forward makes that forward a compiled frame of its own,
    whose graphs' paths are under it), or () where no compiled function known here runs it. With no ``root``, where
    the frame's modules are the recorded model's: (module, call, the root scope its path is under)."""
    running = _RUNNING.get()
    if running is None:
        return ()
    nodes, owners, graph_key = running
    key = (graph_key, origins, None if root is None else id(root[1]))  # all held while recorded
    found = _RESOLVED.get(key)
    if found is None:

        def under(local: str) -> str | None:  # no compiled module's call around: paths under the frame's own module
            if root is None:
                return "" if local == SELF else None
            return _path_under(root[1], owners.get(local, _NO_SELF))

        # no compiled module's call around: a frame's modules found in the recorded model (a module a compiled
        # function was handed, L['layers'].1), their paths from its root's scope; else as under the frame's self
        found = _scopes(origins, _recorded_nodes(origins, nodes, owners), lambda local: "") if root is None else ()
        found = (*found, (MODULE_PREFIX, None)) if found else _scopes(origins, nodes, under)
        _RESOLVED[key] = found
    return found


def _recorded_nodes(origins: tuple, nodes: dict, owners: dict) -> dict:
    """The nodes ``origins`` with their module's path in the recorded model, where the module their frame's local
    holds along their path (``L['self'].fc``: a plain object's attribute, ``L['layers'].1``: a ModuleList's child,
    read from the instance dicts) is one of its modules; a node of another names nothing."""
    found = {}
    for name in origins:
        local, path, call = nodes.get(name, (None, "", None))
        value = owners.get(local, _NO_SELF)
        for part in filter(None, path.split(".")):
            held = vars(value) if type(getattr(value, "__dict__", None)) is dict else {}
            value = held.get("_modules", {}).get(part) if isinstance(value, torch.nn.Module) else held.get(part)
        recorded = _RECORDED_PATHS.get(id(value)) if value is not None else None
        found[name] = ("", recorded, call) if recorded is not None else (None, "", None)
    return found


def _path_under(root: Any, module: Any) -> str | None:
    """The dotted path of ``module`` under ``root`` ("" for itself), or None where it is none, or two, of root's."""
    if not isinstance(root, torch.nn.Module):
        return None
    paths = _PATHS.get(id(root))
    if paths is None:  # made once a recording
        paths = _PATHS[id(root)] = {}
        for name, each in root.named_modules(remove_duplicate=False):
            paths[id(each)] = name if id(each) not in paths else None
    return paths.get(id(module))


def _ranged(kernel: Callable, name: str, origins: tuple) -> Callable:
    """A C++ kernel run in the scopes of its source nodes ``origins`` and an operator range of its own ``name``."""

    def cpp_kernel_in_scopes(*args: Any) -> Any:
        return _in_scopes(origins, kernel, args, {}, name)

    return cpp_kernel_in_scopes


class _ScopedLaunches:
    """A Triton kernel (inductor's ``CachingAutotuner``) whose ``run`` opens its scopes; anything else is its own."""

    def __init__(self, kernel: Any, origins: tuple) -> None:
        self._kernel, self._origins = kernel, origins

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return _in_scopes(self._origins, self._kernel.run, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)


class _ScopedExterns:
    """inductor's ``extern_kernels`` namespace as one wrapper module reads it: a call from a line whose origins are
    known opens their scopes (lines: line number -> source nodes)."""

    def __init__(self, held: Any, lines: dict[int, tuple], filename: str | None) -> None:
        self._held, self._lines, self._filename = held, lines, filename

    def __getattr__(self, name: str) -> Any:
        return _scoped_from_line(getattr(self._held, name), self._lines, self._filename)


class _ScopedTorch(types.ModuleType):
    """``torch`` as one wrapper module reads it: its ``ops`` read on a line of an ATen fallback whose origins are known
    (``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(...)``) calls it in their scopes; every
    other attribute is torch's own, held in this module's dict so that reading it costs no more than before."""

    def __init__(self, lines: dict[int, tuple], filename: str | None) -> None:
        super().__init__(torch.__name__)
        vars(self).update((key, value) for key, value in vars(torch).items() if key != "ops")
        self._ks_lines, self._ks_filename = lines, filename

    def __getattr__(self, name: str) -> Any:
        found = getattr(torch, name)
        return _scoped_from_line(found, self._ks_lines, self._ks_filename) if name == "ops" else found


def _scoped_from_line(value: Any, lines: dict[int, tuple], filename: str | None) -> Any:
    """``value`` as read by the caller of the caller: a ``_ScopedCall`` of it where that line's source nodes are
    known."""
    caller = sys._getframe(2)
    origins = lines.get(caller.f_lineno) if caller.f_code.co_filename == filename else None
    return value if origins is None else _ScopedCall(value, origins)


class _ScopedCall:
    """A callable, or a namespace on the way to one (``torch.ops.aten``), whose call runs in the scopes of its source
    nodes ``origins``."""

    def __init__(self, value: Any, origins: tuple) -> None:
        self._value, self._origins = value, origins

    def __getattr__(self, name: str) -> Any:
        return _ScopedCall(getattr(self._value, name), self._origins)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _in_scopes(self._origins, self._value, args, kwargs)
