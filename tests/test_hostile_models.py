"""Models whose objects misbehave when the recorder walks them: containers whose own ``__iter__``, ``__len__``,
``items`` or ``__getitem__`` raise or never end, objects whose ``__eq__``, ``__hash__``, ``__bool__`` or ``__repr__``
raise, a ``__getattr__`` or a ``__class__`` that raises something other than AttributeError, a lazy module whose
``__getattr__`` raises ImportError. Passed as a call's arguments (torch reads a list or tuple subclass without its
methods, and an autograd Function takes anything), returned by a forward, held as a module attribute or a module
global, each is an opaque leaf to the recorder: the recording ends, the model returns what it returns unrecorded,
and its calls are named as any others."""

import collections
import functools
import itertools
import sys
import types
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from conftest import assert_patches_undone, snapshot_patch_targets  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from test_samples_as_called import Tagged  # noqa: E402 (an autograd Function that takes any object)
from torch import nn  # noqa: E402


def _refusing(*names: str) -> dict:
    """Methods ``names`` that each raise, for a class of the model's own that refuses to be read."""

    def refuse(self, *args):
        raise RuntimeError(f"a {type(self).__qualname__} that refuses to be read")

    return dict.fromkeys(names, refuse)


_READING = ("__iter__", "__len__", "__getitem__")
RaisingList = type("RaisingList", (list,), _refusing(*_READING))
RaisingTuple = type("RaisingTuple", (tuple,), _refusing(*_READING))
RaisingDict = type("RaisingDict", (dict,), _refusing(*_READING, "keys", "items", "values"))


class EndlessList(list):
    def __iter__(self):
        return itertools.repeat(F.gelu)


class EndlessTuple(tuple):
    def __iter__(self):
        return itertools.count()


class NotIterableTuple(tuple):
    def __iter__(self):
        return 5


class EndlessDict(dict):
    def __iter__(self):
        return itertools.count()

    def items(self):
        return zip(itertools.count(), itertools.repeat(F.gelu))

    def values(self):
        return itertools.repeat(F.gelu)


_Refusing = type("_Refusing", (), _refusing("__eq__", "__hash__", "__bool__", *_READING))


class Unfriendly(_Refusing):
    """Raises on every question: equality, hashing, truth, length, iteration, printing, any missing attribute."""

    def __repr__(self):
        raise RuntimeError("no repr")

    def __getattr__(self, name):
        raise RuntimeError(f"no attribute {name}")


class CallableUnfriendly(Unfriendly):
    def __call__(self, *args):
        raise RuntimeError("not to be called")


class HiddenClass:
    """An object whose ``__class__`` raises (a proxy outside its context)."""

    @property
    def __class__(self):
        raise RuntimeError("no class outside its context")


_Pair = collections.namedtuple("_Pair", "act scale")


RaisingPair = type("RaisingPair", (_Pair,), _refusing("__iter__", "__len__"))


class EndlessPair(_Pair):
    def __iter__(self):
        return itertools.count()


class GuardedPartial(functools.partial):
    def __getattribute__(self, name):
        if name in ("func", "args", "keywords"):
            raise RuntimeError(f"a partial that hides its {name}")
        return object.__getattribute__(self, name)


def hostile_objects() -> list:
    """One of each kind, each holding F.gelu where it holds anything (so that the scan of stored references looks)."""
    return [
        RaisingList([F.gelu, 1]), EndlessList([F.gelu]), RaisingTuple((F.gelu, 1)), EndlessTuple((F.gelu,)),
        NotIterableTuple((F.gelu,)), RaisingDict(act=F.gelu), EndlessDict(act=F.gelu), Unfriendly(),
        CallableUnfriendly(), HiddenClass(), RaisingPair(F.gelu, 2), EndlessPair(F.gelu, 2), GuardedPartial(F.gelu),
    ]  # fmt: skip


# held as module globals of the model's code (the scan of stored references reads them)
HOSTILE_GLOBALS = hostile_objects()
(RAISING_LIST, ENDLESS_LIST, RAISING_TUPLE, ENDLESS_TUPLE, NOT_ITERABLE_TUPLE, RAISING_DICT, ENDLESS_DICT, UNFRIENDLY,
 CALLABLE_UNFRIENDLY, HIDDEN_CLASS, RAISING_PAIR, ENDLESS_PAIR, GUARDED_PARTIAL) = HOSTILE_GLOBALS  # fmt: skip


def _lazy_module() -> types.ModuleType:
    """A module that imports its names lazily: its ``__getattr__`` raises ImportError for any name it lacks
    (``__file__`` too)."""
    module = types.ModuleType("kernelscope_test_lazy_helpers")

    def __getattr__(name):  # noqa: N807
        raise ImportError(f"cannot import {name} lazily")

    module.__getattr__ = __getattr__
    return module


LAZY = _lazy_module()
LazyHelper = type("LazyHelper", (), {"__module__": LAZY.__name__})  # a global class whose module is the lazy one


@pytest.fixture
def lazy_module_imported(monkeypatch):
    """The lazy module in sys.modules, imported after torch's inductor (whose first import reads every module's
    ``__file__``, and fails on this one without kernelscope too), and after dynamo compiled code (the recording then
    looks for dynamo's graphs in every module's globals: it read ``__file__`` through the lazy ``__getattr__``)."""
    hasattr(torch, "_inductor")
    torch.compile(lambda t: t + 1, backend="eager")(torch.ones(1))
    monkeypatch.setitem(sys.modules, LAZY.__name__, LAZY)


class TakesThem(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, *hostile):
        y = F.relu(self.fc(x))
        for option in hostile:
            y = Tagged.apply(y, option)  # (torch's apply itself asks an argument's __class__: none is HiddenClass)
        y = torch.cat(RaisingList([y, y]))  # torch reads a list subclass's items without its methods
        y = torch.stack(RaisingTuple((y, y))).sum(0)
        return F.gelu(y.reshape(EndlessTuple((2, 2, 4))))


class PassesThemOn(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = TakesThem()

    def forward(self, x, *hostile):
        return F.silu(self.child(x, *hostile))


class ReturnsOne(nn.Module):
    def __init__(self, returned, bare):
        super().__init__()
        self.fc, self.bare, self.returned = nn.Linear(4, 4), bare, [returned]

    def forward(self, x):
        y = F.relu(self.fc(x))
        return self.returned[0] if self.bare else (y, self.returned[0])


class ChecksWhatTheyReturn(nn.Module):
    def __init__(self):
        super().__init__()
        self.returning = nn.ModuleList([ReturnsOne(obj, bare) for obj in hostile_objects() for bare in (True, False)])
        self.changed: list[str] = []

    def forward(self, x):
        for child in self.returning:
            result, returned = child(x), child.returned[0]
            if not (result is returned if child.bare else type(result) is tuple and result[1] is returned):
                self.changed.append(type(returned).__qualname__)
        return F.silu(x)


class HoldsThem(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.act = nn.Linear(4, 4), F.gelu
        for index, value in enumerate(hostile_objects()):
            object.__setattr__(self, f"hostile_{index}", value)  # past nn.Module.__setattr__, which asks __class__
        self.helper = LazyHelper()

    def forward(self, x):
        return self.act(self.fc(x))


def _profile(model, args, out=None):
    with torch.no_grad():
        expected = model(*args)
    before = snapshot_patch_targets(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame, data = ModuleFunctionKernelProfiler().profile(model, [(args, {})], warmup_iterations=2, out=out)
    assert not [w for w in caught if "kernelscope" in str(w.message)], "nothing left out of the run"
    assert_patches_undone(model, before)
    with torch.no_grad():
        assert torch.equal(model(*args), expected), "the model computes what it computed before the recording"
    return frame, data


def _modules_of(frame, function: str) -> set:
    return set(frame.loc[frame["function_name"] == function, "module_name"])


def test_hostile_objects_as_arguments_of_calls_are_opaque_leaves(tmp_path):
    model, hostile = PassesThemOn().eval(), [obj for obj in hostile_objects() if type(obj) is not HiddenClass]
    frame, data = _profile(model, (torch.randn(2, 4), *hostile), out=tmp_path / "run")
    assert _modules_of(frame, "Tagged.apply") == {"child"}
    assert sum(calls for calls, _ in data["Tagged.apply"]) == len(hostile), "one call per object"
    assert _modules_of(frame, "torch.cat") == {"child"} and _modules_of(frame, "Tensor.reshape") == {"child"}
    assert _modules_of(frame, "gelu") == {"child"} and _modules_of(frame, "silu") == {""}
    (_, (args, _kwargs)), *_ = data["torch.cat"]
    assert type(args[0]) is RaisingList, "a sample keeps the argument as it was passed"
    saved = torch.load(tmp_path / "run" / "samples.pt", weights_only=True)["functions"]["torch.cat"]
    assert [len(entry[0][0]) for entry in saved] == [2], "samples.pt holds the list's two tensors"


def test_hostile_objects_returned_by_forwards_are_handed_back_as_they_are():
    model = ChecksWhatTheyReturn().eval()
    frame, _ = _profile(model, (torch.randn(2, 4),))
    assert _modules_of(frame, "relu") == {f"returning.{index}" for index in range(len(model.returning))}
    assert model.changed == [], "each forward's result reached its caller as the very object it returned"


def test_hostile_objects_held_as_attributes_and_globals_leave_the_stored_references_named(lazy_module_imported):
    model = HoldsThem().eval()
    frame, _ = _profile(model, (torch.randn(2, 4),))
    assert _modules_of(frame, "gelu") == {""}, "self.act = F.gelu is named beside the hostile attributes"
    assert _modules_of(frame, "linear") == {"fc"}


def test_hostile_globals_are_put_back_as_they_were(lazy_module_imported):
    before = dict(globals())
    _profile(HoldsThem().eval(), (torch.randn(2, 4),))
    assert globals().keys() == before.keys() and all(globals()[k] is v for k, v in before.items())


class AnswersForwardItsOwnWay(nn.Module):
    """``__getattribute__`` answers ``forward`` with another method (as wrappers that switch paths do): torch's call
    never reaches an instance attribute ``forward``, and its calls were named after its parent."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def __getattribute__(self, name):
        if name == "forward":
            return object.__getattribute__(self, "fast_path")
        return super().__getattribute__(name)

    def forward(self, x):
        return F.elu(self.fc(x))

    def fast_path(self, x):
        return F.hardswish(self.fc(x))


def test_a_module_answering_forward_with_another_method_has_its_calls_in_its_scope():
    model = nn.Sequential(AnswersForwardItsOwnWay(), nn.ReLU()).eval()
    before = snapshot_patch_targets(model)
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 16),), {})], warmup_iterations=1)
    assert_patches_undone(model, before)
    assert set(frame.loc[frame["function_name"] == "hardswish", "module_name"]) == {"0"}
    assert set(frame.loc[frame["function_name"] == "linear", "module_name"]) == {"0.fc"}
    assert [calls for calls, _ in data["hardswish"]] == [1] and "elu" not in data
    assert "_call_impl" not in vars(model[0]) and "forward" not in vars(model[0])


def test_hostile_arguments_under_a_default_device_are_opaque_leaves(tmp_path):
    """torch's DeviceContext handles every call under a default device: which handlers may compare a function by
    identity was asked of the items of the list and tuple arguments, read through their own methods, which raised."""
    with torch.device("cpu"):
        frame, _ = _profile(PassesThemOn().eval(), (torch.randn(2, 4),), out=tmp_path / "run")
    assert _modules_of(frame, "torch.cat") == {"child"} and _modules_of(frame, "torch.stack") == {"child"}
