"""Module scopes inside a ``torch.export``'ed program.

``ExportedProgram.module()`` is one flat GraphModule: no submodule forward runs, so every kernel would have the
GraphModule's own module alone. Its nodes say which modules of the exported model they ran in
(``node.meta["nn_module_stack"]``, outermost first). While recorded, such a GraphModule runs its graph node by node
(``torch.fx.Interpreter``: the same operators on the same values) and opens, around each node, kernelscope's module
scope of every module the node ran in, named by the exported path under the GraphModule's own name; the patched
warm-ups run it node by node too, without scopes, so that they make the recorded pass's calls. The graph's
Python code is not run then; the Interpreter costs a few microseconds of CPU per node, none on the device.

A ``torch.fx.symbolic_trace`` that traced into submodules is run so too: its nodes of the root module have no stack
(they are scoped in the root), and the functions its nodes hold (``F.gelu`` itself) are called as the recording
patched them, as its own code would read them."""

from __future__ import annotations

import inspect
from typing import Any

import torch
from kernelscope.analyzer.rundir import MODULE_PREFIX, scope_text

from .scope_gate import OPEN as scopes_open

_Scope = torch._C._profiler._RecordFunctionFast
_STACK = "nn_module_stack"
_CALLS = ("call_function", "call_method", "call_module")


def has_module_stacks(module: Any) -> bool:
    """Whether ``module`` is a GraphModule whose operations record the modules they ran in (an exported program's, or
    a ``torch.fx.symbolic_trace`` that traced into submodules). One whose only stacks are on its ``call_module``
    nodes (a symbolic trace of leaf modules) runs those modules' own forwards, which have their scopes: its code
    runs as it is."""
    if not isinstance(module, torch.fx.GraphModule):  # before reading graph: a TorchScript ModuleList's raises
        return False
    return any(node.op in _CALLS[:2] and node.meta.get(_STACK) for node in module.graph.nodes)


class _ScopedInterpreter(torch.fx.Interpreter):
    """Runs the graph with the module scopes of each node open around it."""

    def __init__(
        self, module: torch.fx.GraphModule, paths: dict, originals: dict, wrappers: dict, scoped: bool = True
    ) -> None:
        super().__init__(module)
        self.paths = paths  # node -> the scope names of the modules it ran in, outermost first
        self.scoped = scoped  # False: no module scope opens (a warm-up pass)
        self.originals, self.wrappers = originals, wrappers
        self.open: list[tuple[str, Any]] = []

    def run_node(self, node: torch.fx.Node) -> Any:
        if not self.scoped:
            return super().run_node(node)
        wanted = self.paths.get(node)
        if wanted is None and node.op in _CALLS:  # a symbolic trace's operations of the root module have no stack
            wanted = []
        if wanted is not None:
            kept = 0
            while kept < min(len(wanted), len(self.open)) and self.open[kept][0] == wanted[kept]:
                kept += 1
            self._close_to(kept)
            for scope_name in wanted[kept:]:
                scope = _Scope(scope_name)
                scope.__enter__()
                self.open.append((scope_name, scope))
        return super().run_node(node)

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        """The node's function as the recording patched it (a symbolic trace's nodes hold ``F.gelu`` itself, which the
        graph's own code would read from its namespace); an exported graph's operators are none of them."""
        if self.originals.get(id(target)) is target:
            target = self.wrappers[id(target)]
        return super().call_function(target, args, kwargs)

    def _close_to(self, depth: int) -> None:
        while len(self.open) > depth:
            _, scope = self.open.pop()
            scope.__exit__(None, None, None)

    def run_scoped(self, *args: Any) -> Any:
        try:
            return self.run(*args)
        finally:
            self._close_to(0)


def scoped_graph_forward(module: torch.fx.GraphModule, name: str, originals: dict, wrappers: dict) -> Any:
    """A forward for ``module`` (named ``name`` in the profiled model) that runs its graph with its nodes' module
    scopes while scopes are open (else the GraphModule's own forward), for instrument.py's module forward to run
    on the model's threads; its arguments are bound to the GraphModule's own signature (the graph takes them in
    that order). ``originals``, ``wrappers``: ``id(function)`` -> each function the recording patches, its wrapper."""
    forward, signature = module.forward, inspect.signature(module.forward)
    above = f"{name}." if name else ""
    paths = {
        node: [MODULE_PREFIX + scope_text(above + path) for path, _kind in node.meta[_STACK].values() if path]
        for node in module.graph.nodes
        if node.meta.get(_STACK)
    }

    def forward_with_module_scopes(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        if bound.kwargs:  # keyword-only arguments, which the graph's placeholders do not take in order
            return forward(*args, **kwargs)
        # The patched warm-ups run the graph node by node too, module scopes shut (the scope gate, scope_gate.py:
        # no scope before the recorded pass's profiler): they make the recorded pass's calls, which the graph's own
        # code does not (it calls ``torch._C._nn.gelu``, unpatched, where a node holds ``F.gelu``), so that the
        # warm-up's prediction of the recorded pass's samples holds.
        return _ScopedInterpreter(module, paths, originals, wrappers, scopes_open[0]).run_scoped(*bound.args)

    return forward_with_module_scopes
