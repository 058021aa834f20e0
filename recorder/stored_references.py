"""Where a model holds a patched function by reference instead of reading it from its namespace at each call, and
what to put there while it is recorded.

A functional stored before the recording (``self.act = F.gelu``, ``ACTS = {"relu": F.relu}``,
``partial(F.gelu, approximate="tanh")``, ``def forward(self, x, norm=F.layer_norm)``) is called without the namespace
patch seeing it: its kernels would be named after its operator (``aten::gelu``) or the torch call inside it
(``torch.relu``). The places searched, for the observed modules (those a compiled graph does not trace):

- their instance attributes, the globals of the Python modules that define their classes (and the base class their
  forward comes from) and of the modules of the same package those import from (``from .ops import mlp``, where
  ``ops`` holds ``from torch.nn.functional import gelu``), and the items of the dicts (OrderedDicts, defaultdicts),
  lists and tuples those hold (two levels: a registry of activations, a registry of registries);
- the attributes of their classes of the model's own (``act = F.softplus``, ``staticmethod(F.gelu)``, a registry
  ``ACTS = {"gelu": F.gelu}`` and its nested containers, as the globals') and of the objects of the model's own code
  their instance and class attributes hold (one level: a config object's ``cfg.act``, a slotted one's too);
- the values of the members of the Enum classes those globals and class attributes hold (``class Act(Enum): GELU =
  F.gelu``, read as ``Act.GELU.value``: recorder/code_references.py);
- the globals of the functions their classes define where those are a namespace of their own, not a Python
  module's (a forward written by ``exec`` into a dict), and the Python modules those functions import in their
  bodies (``import acts`` inside ``forward``: a lazy import, which no module's globals hold);
- their forward itself where it is a functional (``forward = staticmethod(F.gelu)``, ``self.forward = F.softmax``):
  the module's scope calls the wrapper in its place (``held_forward``); an instance ``forward`` of the program's as
  their other attributes (a lambda closing over ``F.gelu``, a callable object holding ``F.silu``);
- the ``call_function`` nodes of their graphs where they are torch.fx GraphModules (which ``torch.fx.Interpreter``
  calls: its generated code reads the namespace);
- the default arguments of the functions their classes define and of the functions among those globals, and the
  closures' cells of the functions their instance attributes hold (``self.act = make_act()``, a lambda closing over
  ``F.silu``; not those of the methods of their classes, which compare what they close over as often as they call it).

A reference is the original itself (replaced by its wrapper) or a ``functools.partial`` of it (replaced by the same
partial of the wrapper). Only what holds a reference is replaced, and put back after the recording."""

from __future__ import annotations

import collections
import functools
import inspect
import os
import sys
import types
from collections.abc import Iterator
from itertools import repeat
from typing import Any

import torch
from torch import nn

from .code_references import code_namespaces, enum_sites, imported_modules
from .reference_slots import Attributes, Cell, NodeTarget, SlotAttribute, Slots, slot_attributes

_ABSENT = object()
_LARGEST_SCANNED = 1024  # items of a container looked into: a registry of activations, not a vocabulary


def _graph_sites(module: Any, originals: dict, wrappers: dict) -> Iterator[tuple[Any, Any, Any]]:
    """The call_function nodes of an observed GraphModule's graph that call a patched function."""
    if not _is(module, torch.fx.GraphModule):
        return
    for node in module.graph.nodes:
        if node.op == "call_function" and originals.get(id(node.target), _ABSENT) is node.target:
            yield NodeTarget(node), 0, wrappers[id(node.target)]


def _is(value: Any, kinds: type | tuple[type, ...]) -> bool:
    """isinstance by the value's type alone: isinstance also asks ``value.__class__``, which runs code of the
    object's own where it is a property (a proxy's, such as werkzeug's LocalProxy, raises outside its context), and
    these scans read every global of the model's modules."""
    return issubclass(type(value), kinds)


def _replacement(value: Any, originals: dict[int, Any], wrappers: dict[int, Any]) -> Any:
    """What stands in for ``value`` while recorded, or _ABSENT where it holds no patched function."""
    if originals.get(id(value), _ABSENT) is value:
        return wrappers[id(value)]
    if _is(value, functools.partial):
        try:
            func, args, keywords = value.func, value.args, value.keywords
        except Exception:  # noqa: BLE001 (a subclass's own __getattribute__): an object left as it is
            return _ABSENT
        if originals.get(id(func), _ABSENT) is func:
            return functools.partial(wrappers[id(func)], *args, **keywords)
    return _ABSENT


def held_forward(forward: Any, originals: dict[int, Any], wrappers: dict[int, Any]) -> Any:
    """A module's forward that is a patched functional itself (``forward = staticmethod(F.gelu)`` on its class,
    ``self.forward = partial(F.softmax, dim=-1)``): its wrapper, which the module's scope then calls (the instance
    wrapper captures the forward before any stored reference is patched); any other forward as it is."""
    replacement = _replacement(forward, originals, wrappers)
    return forward if replacement is _ABSENT else replacement


def _scanned(value: Any) -> bool:
    """Whether ``value`` is a container looked into: a plain dict (or the standard library's OrderedDict or
    defaultdict), list or tuple, or a named tuple (a subclass of dict or list of the program's own may do anything
    when read or written), of a registry's size, counted without a method of a named tuple's own (its ``__len__``
    may raise)."""
    kind = type(value)
    plain = kind in _CONTAINERS or (_is(value, tuple) and hasattr(kind, "_make"))
    return plain and 0 < (tuple.__len__(value) if _is(value, tuple) else len(value)) <= _LARGEST_SCANNED


# What a value must be for _sites_in to find anything in it, besides a patched function (by id): a plain container
# of a registry's size, or a partial or named tuple (their subclasses too).
_DICTS = frozenset((dict, collections.OrderedDict, collections.defaultdict))
_CONTAINERS = frozenset((*_DICTS, list, tuple))
_SUBCLASSED = (functools.partial, tuple)


def _items_sites(owner: dict, items: Any, originals: dict, wrappers: dict, skip: str) -> list:
    """_sites_in for every item of ``owner`` (a namespace's or an instance's dict) but ``skip`` and the
    interpreter's ``__builtins__``: the few that can hold a patched function are picked first, in one pass that
    calls nothing per item (a package's globals run to thousands of names, and this runs for every recording)."""
    sites: list[tuple[Any, Any, Any]] = []
    picked = [
        (k, v)
        for k, v in items
        if id(v) in originals
        or (type(v) in _CONTAINERS and 0 < len(v) <= _LARGEST_SCANNED)
        or issubclass(type(v), _SUBCLASSED)
    ]
    for key, value in picked:
        if key != skip and key != "__builtins__":
            sites.extend(_sites_in(owner, key, value, originals, wrappers))
    return sites


def _may_hold(values: Any, originals: dict, nested: bool) -> bool:
    """Whether a container's items include a patched function or a partial (or, ``nested``, a container), tested at
    C speed (most hold none)."""
    partials = map(issubclass, map(type, values), repeat(functools.partial))
    if not originals.keys().isdisjoint(map(id, values)) or any(partials):
        return True
    return nested and not _CONTAINERS.isdisjoint(map(type, values))


def _sites_in(
    owner: Any, key: Any, value: Any, originals: dict, wrappers: dict, nested: bool = True
) -> Iterator[tuple[Any, Any, Any]]:
    """(owner, key, replacement) for ``value``, held at ``owner[key]``, for the items it holds and, ``nested``, for
    those of the containers among them (a registry of registries: ``{"vision": {"act": F.gelu}}``) where it is a
    dict or a list."""
    replacement = _replacement(value, originals, wrappers)
    if replacement is not _ABSENT:
        yield owner, key, replacement
    elif _scanned(value) and _may_hold(held := _held_values(value), originals, nested):
        items = list(value.items() if type(value) in _DICTS else enumerate(held))
        found = [(k, r) for k, v in items if (r := _replacement(v, originals, wrappers)) is not _ABSENT]
        if _is(value, tuple):  # immutable: the whole tuple is replaced where it is held, as its own type
            if found:
                replaced = list(held)
                for k, r in found:
                    replaced[k] = r
                yield owner, key, tuple.__new__(type(value), replaced)  # as a named tuple's _make makes it
            return
        holder = value if _is(value, dict) else Slots(value)
        for k, r in found:
            yield holder, k, r
        if nested:
            for k, v in items:
                if type(v) in _CONTAINERS:
                    yield from _sites_in(holder, k, v, originals, wrappers, nested=False)


def _held_values(value: Any) -> Any:
    """The values a scanned container holds, a named tuple's read without its own methods (which may raise or never
    end)."""
    if type(value) in _DICTS:
        return value.values()
    return value if type(value) in _CONTAINERS else list(tuple.__iter__(value))


def _default_sites(function: Any, originals: dict, wrappers: dict) -> Iterator[tuple[Any, Any, Any]]:
    for position, value in enumerate(getattr(function, "__defaults__", None) or ()):
        replacement = _replacement(value, originals, wrappers)
        if replacement is not _ABSENT:
            yield Slots(function, defaults_of=True), position, replacement
    keyword_defaults = getattr(function, "__kwdefaults__", None)
    if isinstance(keyword_defaults, dict):
        for key, value in keyword_defaults.items():
            replacement = _replacement(value, originals, wrappers)
            if replacement is not _ABSENT:
                yield keyword_defaults, key, replacement


def _closure_sites(function: Any, originals: dict, wrappers: dict) -> Iterator[tuple[Any, Any, Any]]:
    for cell in getattr(function, "__closure__", None) or ():
        replacement = _replacement(Cell(cell).get(0, _ABSENT), originals, wrappers)
        if replacement is not _ABSENT:
            yield Cell(cell), 0, replacement


def _class_sites(kind: type, originals: dict, wrappers: dict) -> Iterator[tuple[Any, Any, Any]]:
    """The sites of a model's own class: its functions' defaults, and its attributes that hold a functional
    (``act = F.softplus``, ``act = staticmethod(F.gelu)``, ``ACTS = {"gelu": F.gelu}``: a registry). Not its methods'
    closures: a method closing over a functional compares it (``if F.relu is not original_relu``) as often as it
    calls it; but a lambda's (``forward = lambda self, x: act(x)``), whose one expression calls what it closes over."""
    for key, value in list(vars(kind).items()):
        if _is(value, types.FunctionType):
            yield from _default_sites(value, originals, wrappers)
        function = value.__func__ if _is(value, (staticmethod, classmethod)) else value
        if _is(function, types.FunctionType) and function.__code__.co_name == "<lambda>":
            yield from _closure_sites(function, originals, wrappers)
        if key.startswith("__"):
            continue
        held = value.__func__ if _is(value, staticmethod) else value
        yield from enum_sites(held, _items_sites, originals, wrappers)  # an Enum of functionals defined in the class
        replacement = _replacement(held, originals, wrappers)
        if replacement is _ABSENT:
            if _plain_object(held):  # a config object as a class attribute (``CONFIG = Settings()``), one level
                yield from _items_sites(vars(held), list(vars(held).items()), originals, wrappers, "__builtins__")
            yield from _slot_sites(held, originals, wrappers)
            if _scanned(held):  # a registry as a class attribute: ACTS = {"gelu": F.gelu}, PAIR = (F.silu, F.tanh)
                yield from _sites_in(Attributes(kind), key, held, originals, wrappers)
            continue
        if _is(value, staticmethod) or not _is(held, types.FunctionType):  # a builtin binds no instance
            replacement = staticmethod(replacement)
        yield Attributes(kind), key, replacement


def _plain_object(value: Any) -> bool:
    """Whether ``value`` is an object of the model's own code whose attributes are looked into (one level: a config
    object holding an activation, ``self.cfg.act = F.gelu``): not a class, a Python module, a function, a container,
    a tensor or a torch.nn module (the observed ones are looked into as modules), nor an object of torch's or of
    Python's (a module's hook dicts are OrderedDicts, which have a ``__dict__``)."""
    if not _of_the_models_code(value):
        return False
    try:
        vars(value)
    except Exception:  # noqa: BLE001 (none, or a __getattribute__ of the model's own that raises)
        return False
    return True


def _of_the_models_code(value: Any) -> bool:
    if _is(value, _NOT_PLAIN):
        return False
    module = _text(type(value), "__module__") or "builtins"  # torchtune's or torchvision's are not torch's
    return module != "torch" and not module.startswith(("torch.", "builtins", "collections"))


def _slot_sites(value: Any, originals: dict, wrappers: dict) -> Iterator[tuple[Any, Any, Any]]:
    """The slots of an object of the model's own code that hold a patched function (a config made with
    ``@dataclass(slots=True, frozen=True)`` holding ``act=F.gelu``), one level, as ``_plain_object``'s attributes."""
    if not _of_the_models_code(value):
        return
    for name, slot in slot_attributes(value):
        owner = SlotAttribute((value, slot))
        replacement = _replacement(owner.get(name, _ABSENT), originals, wrappers)
        if replacement is not _ABSENT:
            yield owner, name, replacement


_NOT_PLAIN = (type, types.ModuleType, types.FunctionType, dict, list, tuple, set, frozenset, nn.Module, torch.Tensor)


def _own_classes(module: Any) -> Iterator[type]:
    """The classes of ``module``'s type that are not torch's (whose defaults are torch's business)."""
    for kind in type(module).__mro__:
        if not (_text(kind, "__module__") or "builtins").startswith(("torch.", "builtins")):
            yield kind


def stored_reference_sites(
    modules: list[Any], originals: dict[int, Any], wrappers: dict[int, Any], forwards: dict[int, Any] | None = None
) -> list:
    """(owner, key, replacement) for every place listed in the module docstring that holds a patched function:
    ``owner`` is a dict (write ``owner[key]``) or a Slots. ``originals``, ``wrappers``: id(original) -> the
    original, its wrapper. ``forwards``: id(module) -> the instance ``forward`` the program set, where the
    recorder's wrapper stands in its place now (None: the instance dicts hold the program's own)."""
    seen_objects: set[int] = set()
    sites = instance_sites(modules, originals, wrappers, seen_objects, forwards)
    seen_classes: set[int] = set()
    for module in modules:
        for kind in _own_classes(module):
            if id(kind) not in seen_classes:
                seen_classes.add(id(kind))
                sites.extend(_class_sites(kind, originals, wrappers))
                for namespace in code_namespaces(kind, seen_objects):
                    sites.extend(_items_sites(namespace, list(namespace.items()), originals, wrappers, "__builtins__"))
    for namespace in code_modules(modules):
        _module_sites(namespace, sites, originals, wrappers)
    return sites


def code_modules(modules: list[Any]) -> list[types.ModuleType]:
    """The Python modules of the model's code whose globals the scan reads for the observed ``modules``: those
    defining their classes and the classes their forwards come from (``class Model(Base)``, Base's forward in a
    module of its own), the modules of the same code those hold (one step: ``from .ops import mlp``), and those their
    classes' functions import in their bodies. recorder/late_imports.py puts back the same ones."""
    found: dict[str, types.ModuleType] = {}
    imported: list[types.ModuleType] = []  # by import statements in the classes' functions (code_references.py)
    seen_classes: set[int] = set()
    for module in modules:
        kinds = list(_own_classes(module))
        for kind in kinds:
            if id(kind) not in seen_classes:
                seen_classes.add(id(kind))
                imported += imported_modules(kind)
        forward_class = next((kind for kind in kinds if "forward" in vars(kind)), type(module))
        for kind in (type(module), forward_class):
            name = _text(kind, "__module__") or "builtins"
            defining = None if name in found or name.startswith(("torch.", "builtins")) else inspect.getmodule(kind)
            if defining is not None:
                found[name] = defining
    for helper in [*(helper for defining in list(found.values()) for helper in _helpers(defining)), *imported]:
        found.setdefault(_text(helper, "__name__"), helper)  # one step only: the helpers' own imports are not read
    return list(found.values())


def instance_sites(
    modules: list[Any],
    originals: dict[int, Any],
    wrappers: dict[int, Any],
    seen_objects: set[int],
    forwards: dict[int, Any] | None = None,
) -> list:
    """The sites of stored_reference_sites in the modules' own attributes: their instance dicts, the items of the
    containers those hold, lambdas' closures and defaults, and the objects of the model's own code they hold
    (``seen_objects``: their ids, added to); an instance ``forward`` as the other attributes, the program's own
    (``forwards``, where given) in place of the recorder's wrapper."""
    sites: list[tuple[Any, Any, Any]] = []
    for module in modules:
        namespace = vars(module)
        sites.extend(_items_sites(namespace, namespace.items(), originals, wrappers, skip="forward"))
        sites.extend(_graph_sites(module, originals, wrappers))
        for key, value in namespace.items():
            if key == "forward" and forwards is not None:  # the recorder's wrapper: what it wraps is the program's
                value = forwards.get(id(module), _ABSENT)
            if _is(value, types.FunctionType):  # a lambda's closure or defaults: ``lambda x, act=F.silu: act(x)``
                sites.extend(_closure_sites(value, originals, wrappers))
                sites.extend(_default_sites(value, originals, wrappers))
            elif id(value) not in seen_objects and _of_the_models_code(value):
                seen_objects.add(id(value))
                sites.extend(_slot_sites(value, originals, wrappers))
                if _plain_object(value):
                    held = vars(value)
                    sites.extend(_items_sites(held, list(held.items()), originals, wrappers, skip="__builtins__"))
    return sites


def module_sites(namespace: types.ModuleType, originals: dict, wrappers: dict) -> list[tuple[Any, Any, Any]]:
    """The sites of one Python module's globals and of the classes it defines (recorder/late_imports.py)."""
    sites: list[tuple[Any, Any, Any]] = []
    _module_sites(namespace, sites, originals, wrappers)
    name = _text(namespace, "__name__")
    for value in list(vars(namespace).values()):
        if _is(value, type) and name is not None and _text(value, "__module__") == name:
            sites.extend(_class_sites(value, originals, wrappers))
    return sites


def _module_sites(namespace: types.ModuleType, sites: list, originals: dict, wrappers: dict) -> None:
    """Add the sites of a Python module's globals to ``sites``."""
    name, items = namespace.__name__, list(vars(namespace).items())
    sites.extend(_items_sites(vars(namespace), items, originals, wrappers, skip="__builtins__"))
    for _, value in items:
        sites.extend(enum_sites(value, _items_sites, originals, wrappers))  # an Enum of functionals: Act.GELU.value
        function = _is(value, types.FunctionType)
        if function and _text(value, "__module__") == name and (value.__defaults__ or value.__kwdefaults__):
            sites.extend(_default_sites(value, originals, wrappers))


def _helpers(namespace: types.ModuleType) -> list[types.ModuleType]:
    """The other modules of the same code that a Python module holds or holds functions and classes of (``from .ops
    import mlp``, whose ``ops`` may hold ``from torch.nn.functional import gelu``): of its top-level package, or
    beside it in its folder."""
    name, helpers = namespace.__name__, {}
    package, folder = name.partition(".")[0] + ".", _folder(namespace)
    for value in list(vars(namespace).values()):
        helper = value if _is(value, types.ModuleType) else None
        if helper is None and (_is(value, types.FunctionType) or _is(value, type)):
            helper = sys.modules.get(_text(value, "__module__") or "")
        helper_name = _text(helper, "__name__")
        if helper is None or helper is namespace or helper_name is None:
            continue
        if helper_name.startswith(package) or folder is not None and _folder(helper) == folder:
            helpers[id(helper)] = helper
    return list(helpers.values())


def _text(value: Any, attribute: str) -> str | None:
    """``value.attribute`` where it is a str; None where it is not or reading it raises (a module's own
    ``__getattr__`` that imports lazily raises ImportError for a name it lacks, a class's metaclass anything)."""
    try:
        text = getattr(value, attribute, None)
    except Exception:  # noqa: BLE001 (the program's own code)
        return None
    return text if type(text) is str else None


def _folder(module: types.ModuleType) -> str | None:
    path = _text(module, "__file__")
    return None if path is None else os.path.dirname(path)
