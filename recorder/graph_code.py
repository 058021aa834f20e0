"""The code of torch.fx GraphModules, calling the patched functions where their nodes hold them.

fx writes a GraphModule's code with each torch function it calls named by its qualified name, read at each call
(``torch.nn.functional.relu(x)``), so a patched namespace reaches it. A functional that is a C function of
``torch._C._nn`` (``F.gelu``, ``F.softplus``, ``F.linear``) is written ``torch._C._nn.gelu(x)``: that namespace is
not patched (``torch.nested`` compares a handler's ``func`` with ``torch._C._nn.scaled_dot_product_attention``), so
its kernels would be named after their operator (``aten::gelu``). While recorded, such a GraphModule's forward is one
fx writes from the same graph with those nodes holding the wrappers, whose qualified names are the patched places
(``torch.nn.functional.gelu``): the GraphModules of the model's tree at the start, any other (one
``torch.fx.symbolic_trace`` makes in a forward, one kept in a plain list) at its first call (its ``_WrappedCall``,
through which every GraphModule's ``__call__`` goes). The forward is set on the GraphModule's class (fx makes one per
instance) and put back afterwards; its ``code`` is left as it is. A graph dynamo handed a backend that runs its code
(``return gm.forward``) gets that code in its forward function instead (``GraphCode.name_compiled``)."""

from __future__ import annotations

import functools
import sys
import types
from typing import Any

from .calls import INSIDE_CALL, OTHER_THREAD, on_other_thread
from .compiled import dynamo_tracing
from .compiled_graphs import dynamo_graphs
from .reference_slots import FunctionCode

_ABSENT = object()
# What the nodes of the graphs torch's compilers make hold (dynamo's, a higher-order op's body, make_fx's, an
# exported program's): the values they were traced with
_TRACED_BY_TORCH = frozenset(("example_value", "val"))


@functools.cache
def _fx() -> tuple[Any, Any, Any, Any] | None:
    """fx's own helpers (GraphModule, how it names a function in code, and makes a forward of code), or None where
    this torch has not them."""
    try:
        from torch.fx import GraphModule
        from torch.fx.graph import _is_from_torch
        from torch.fx.graph_module import _forward_from_src
        from torch.fx.node import _get_qualified_name
    except ImportError:
        return None
    return GraphModule, _is_from_torch, _get_qualified_name, _forward_from_src


def _called(function: Any, fx: tuple, planned: dict) -> Any:
    """What fx's code calls where a node holds ``function``, while recorded: the object its qualified name reads
    (``planned``: ``(id(owner), attribute)`` -> what the recording puts there), or ``function`` itself (fx keeps a
    function not from torch in the code's globals)."""
    _, is_from_torch, qualified_name, _ = fx
    try:
        if not is_from_torch(function):
            return function
        first, *names = qualified_name(function).split(".")
        value = sys.modules.get(first)
        for name in names:
            place = (id(value), name)
            value = planned[place] if place in planned else getattr(value, name)
    except Exception:  # noqa: BLE001 - a name fx cannot write or that reads nothing: not this function
        return _ABSENT
    return value


def _named_forward(module: Any, originals: dict, wrappers: dict, planned: dict, dynamos: bool = False) -> Any:
    """``module``'s forward written from its graph with every node holding a patched function that its code would
    not reach (``torch._C._nn.gelu``) holding that function's wrapper; None where there is none, and for a graph
    torch's compilers made (its compiled code calls it: a new forward there would be a frame it has no entry for)
    unless ``dynamos`` (one dynamo handed a backend, named by its code: ``name_compiled``). ``module``: a
    GraphModule of a torch with fx's helpers (``_fx``); ``planned``: as ``_called``'s."""
    fx = _fx()
    graph = module.graph
    swapped = []
    for node in graph.nodes:
        if not dynamos and _TRACED_BY_TORCH & node.meta.keys():  # torch's own graph: its compiled code runs it
            return None
        target = node.target
        if node.op == "call_function" and originals.get(id(target), _ABSENT) is target:
            wrapper = wrappers[id(target)]
            if _called(target, fx, planned) is not wrapper and _called(wrapper, fx, planned) is wrapper:
                swapped.append((node, target, wrapper))
    if not swapped:
        return None
    try:
        for node, _, wrapper in swapped:
            node.target = wrapper
        code = graph.python_code(root_module="self")
    finally:
        for node, target, _ in swapped:
            node.target = target
    return fx[3](code.src, code.globals, getattr(graph, "_co_fields", None))


class GraphCode:
    """Names the calls of the GraphModules of one recording: ``patches`` (instrument.py's) puts each forward in
    place and back; ``originals``, ``wrappers``: ``id(function)`` -> each patched function, its wrapper; ``planned``:
    the patch plan's ``by_place`` (recorder/wrapper_maps.py), whose wrappers may not be in place yet."""

    def __init__(self, patches: Any, originals: dict, wrappers: dict, planned: dict) -> None:
        self.patches, self.originals, self.wrappers, self.planned = patches, originals, wrappers, planned
        self.seen: dict = {}  # class -> the forward it was seen with (a plain dict: its hook runs in compiled code)

    def name(self, module: Any) -> None:
        """``module``'s class's forward named (``_named_forward``) where it is a GraphModule that needs it."""
        kind, fx = type(module), _fx()
        if fx is None or not issubclass(kind, fx[0]):
            return
        forward = vars(kind).get("forward")
        if self.seen.get(kind, _ABSENT) is forward:
            return
        named = _named_forward(module, self.originals, self.wrappers, self.planned)
        if named is not None:
            self.patches.set_attribute(kind, "forward", named)
            forward = named
        self.seen[kind] = forward

    def name_compiled(self) -> None:
        """The graphs dynamo handed a backend that runs their code (``return gm.forward``, ``backend="eager"``)
        named by their forward's code: the compiled function holds the forward bound when it compiled, which the
        class's new forward would not reach. The code it runs is swapped under its ``disable`` (no frame there is
        compiled), its globals given what the new code reads, and both put back afterwards."""
        fx = _fx()
        for module in [] if fx is None else dynamo_graphs(fx[0]):
            forward = vars(type(module)).get("forward")
            if type(forward) is not types.FunctionType or forward.__closure__:
                continue
            named = _named_forward(module, self.originals, self.wrappers, self.planned, dynamos=True)
            namespace = forward.__globals__
            if named is None or any(namespace.get(k, v) is not v for k, v in named.__globals__.items()):
                continue  # a name of the new code that reads another object there: the graph keeps its code
            for key in named.__globals__.keys() - namespace.keys():
                self.patches.set_item(namespace, key, named.__globals__[key])
            self.patches.set_item(FunctionCode(forward), 0, named.__code__)

    def at_first_calls(self, tree: list) -> None:
        """Every GraphModule outside ``tree`` (the model's modules, named at the start) named at its first call on the
        model's threads, from its ``_WrappedCall`` (``tree`` is left alone: a compiled module's are traced into its
        graphs, whose guards a patch would fail)."""
        wrapped_call = getattr(sys.modules.get("torch.fx.graph_module"), "_WrappedCall", None)
        call = vars(wrapped_call).get("__call__") if isinstance(wrapped_call, type) else None
        if call is None:
            return
        in_tree, inside_call, name = frozenset(map(id, tree)), INSIDE_CALL.get, self.name

        def call_named(self: Any, module: Any, *args: Any, **kwargs: Any) -> Any:
            if not (
                id(module) in in_tree
                or dynamo_tracing()
                or inside_call() is OTHER_THREAD
                and on_other_thread()
                or "forward" in vars(module)
            ):
                name(module)
            return call(self, module, *args, **kwargs)

        self.patches.set_attribute(wrapped_call, "__call__", call_named)
