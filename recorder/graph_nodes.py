"""What inductor's compiled code says of the nodes its kernels compute (recorder/inductor_kernels.py names the kernels
from it): each node of dynamo's graph, the compiled frame's local its module is under (``nn_module_stack``), that
module's path and the torch call it is; and, where provenance tracking was on, which nodes each C++ kernel computes.
"""

from __future__ import annotations

import json
import operator
import re
import types
from collections.abc import Iterable
from typing import Any

# dynamo's source of a module, which nn_module_stack's paths start from: a local of the compiled frame (``self``; ``s``
# where a forward names its first parameter so; ``fn``, the module a wrapper frame calls, for a compiled Sequential),
# or a global of its module (``G['ENC']``), then items of plain containers (``L['mods']['enc']``, ``G['ENCS'][0]``: the
# local is named by that whole source), then the children's names, which may be any but a dot (a ModuleDict's ``k-v``)
_SOURCE = re.compile(r"(L\['(\w+)'\]|G\['\w+'\])((?:\[(?:\d+|'[^']*')\])*)((?:\.[^.]+)*)")
SELF = "self"  # the local a node of no module stack ran under: the frame's own module
_OPERATORS = {getattr(operator, name): f"Tensor.__{name}__" for name in dir(operator) if not name.startswith("_")}


def nodes_by_source_name(graph_nodes: Iterable, call_names: dict, known: set) -> dict:
    """``_node_call`` of each node of dynamo's graph by the names inductor's comments may give it: its own, and the
    name its call had when dynamo made it (``source_fn_stack``; a ``Sequential``'s ``input = module(input)`` renames
    the node ``input_1``, and inductor's "Source Nodes" say ``linear``). A name two nodes answer to names nothing."""
    nodes = {node.name: _node_call(node, call_names, known) for node in graph_nodes}
    aliases: dict[str, str | None] = {}
    for node in graph_nodes:
        stack = node.meta.get("source_fn_stack")
        alias = stack[-1][0] if stack and isinstance(stack[-1], tuple) and stack[-1] else None
        if isinstance(alias, str) and alias != node.name:
            aliases[alias] = node.name if alias not in aliases and alias not in nodes else None
    for alias, name in aliases.items():
        nodes[alias] = nodes[name] if name is not None else (None, "", None)
    return nodes


def is_compiled_graph(value: Any) -> bool:
    return type(value).__name__ == "CompiledFxGraph" and type(value).__module__.startswith("torch._inductor")


def _node_call(node: Any, call_names: dict, known: set) -> tuple[str | None, str, str | None]:
    """(the local of the compiled frame the module ``node`` ran in is under (its source, ``G['name']`` or
    ``L['mods']['enc']``, for a global or a container's item), or None where its source is neither;
    the module's dotted path under it ("" for itself); the call it is as the recording names it, or None)."""
    stack = node.meta.get("nn_module_stack") or {}
    source = stack[next(reversed(stack))][0] if stack else f"L['{SELF}']"
    found = _SOURCE.fullmatch(source) if isinstance(source, str) else None
    if found:
        base, name, items, path = found.groups()
        local, module = (name if name and not items else base + items), path.lstrip(".")
    else:
        local, module = None, ""
    if node.op == "call_method":
        name = f"Tensor.{node.target}"
    elif node.op == "call_function":
        builtin = type(node.target) is types.BuiltinFunctionType  # operator's; a callable object may not hash
        name = call_names.get(id(node.target)) or (_OPERATORS.get(node.target) if builtin else None)
    else:
        name = None
    return local, module, name if name in known else None


def provenance_origins(mapping: Any) -> dict[str, tuple[str, ...]]:
    """C++ kernel name -> the nodes of dynamo's graph its calls compute, as inductor's provenance tracking recorded
    them (``torch._inductor.config.trace.provenance_tracking_level`` set when it compiled: the compiled graph's
    ``inductor_provenance_mapping_str``); a kernel with a post-grad node of no recorded source is left out, and a
    mapping of another shape, or none, gives nothing."""
    try:
        tables = json.loads(mapping)
        to_source, kernels = tables["postToPre"], tables["cppCodeToPost"]
        found: dict[str, dict | None] = {}
        for handle, computed in kernels.items():
            name = handle.rpartition(":")[0]
            origins = found.setdefault(name, {})
            for node in computed:
                sources = to_source.get(node)
                if not sources or origins is None:
                    found[name] = origins = None
                    break
                origins.update(dict.fromkeys(sources))
        return {name: tuple(origins) for name, origins in found.items() if origins and name.startswith("cpp_")}
    except Exception:  # noqa: BLE001 - none, or another torch's layout: its C++ kernels stay torch.compile's
        return {}
