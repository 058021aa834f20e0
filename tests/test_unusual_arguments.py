"""Arguments of recorded calls outside the usual shape, each of which broke profile() or its samples: scalars of
a subclass of float, int or str (numpy.float64, an IntEnum, a str Enum), objects whose ``__repr__`` or
``__hash__`` raises or whose ``__eq__`` raises on a hash collision, numpy arrays made afresh in every pass (an index
array), and inputs reshaped in place after their call (``h.t_()``), which samples.json described as they were
afterwards, with a warning that the model's calls differed between passes when they did not; and inputs of a tensor
subclass or in the MKLDNN layout, which made samples.pt unreadable with weights_only (the subclass) or its writing
raise (MKLDNN)."""

import enum
import json
import sys
import types
import warnings

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402, N812


class Rounding(str, enum.Enum):
    FLOOR = "floor"


class Factor(enum.IntEnum):
    TWO = 2


class Scale(float):
    """A float of the model's own type, as numpy.float64 is one."""


class ScalesAndRounds(nn.Module):
    def forward(self, x, scale, factor, rounding):
        return torch.div(torch.mul(torch.mul(x, scale), factor), 3, rounding_mode=rounding)


def _calls(run_dir, name):
    return json.loads((run_dir / "samples.json").read_text())["functions"][name]


@pytest.mark.parametrize("scale", [np.float64(2.5), Scale(2.5)], ids=["numpy-float64", "float-subclass"])
def test_scalars_of_subclasses_of_float_int_and_str_are_recorded_as_their_values(tmp_path, scale):
    x = torch.randn(2, 4)
    profiler = ModuleFunctionKernelProfiler()
    frame, data = profiler.profile(
        ScalesAndRounds(), [((x, scale, Factor.TWO, Rounding.FLOOR), {})], warmup_iterations=1, out=tmp_path / "run"
    )
    assert {"torch.mul", "torch.div"} <= set(frame["function_name"])
    assert [entry["args"]["tuple"][1] for entry in _calls(tmp_path / "run", "torch.mul")] == [2.5, 2]
    assert _calls(tmp_path / "run", "torch.div")[0]["kwargs"] == {"dict": [["rounding_mode", "floor"]]}
    with load_run(tmp_path / "run") as run:  # samples.pt holds plain values, which weights_only reads
        stored = run.function_data(tensors=True)
    assert [type(args[1]) for _, (args, _) in stored["torch.mul"]] == [float, int]
    assert [kwargs for _, (_, kwargs) in stored["torch.div"]] == [{"rounding_mode": "floor"}]
    assert data["torch.mul"][0][1][0][1] is scale, "function_data keeps the live arguments"


class Unprintable:
    """An index whose repr and hash raise (a proxy object of some library, say)."""

    def __index__(self):
        return 1

    def __repr__(self):
        raise RuntimeError("no repr")

    def __hash__(self):
        raise RuntimeError("no hash")


class Selects(nn.Module):
    def __init__(self):
        super().__init__()
        self.index = Unprintable()

    def forward(self, x):
        return (x * 2)[self.index]


def test_an_argument_whose_repr_and_hash_raise_is_recorded(tmp_path):
    frame, data = ModuleFunctionKernelProfiler().profile(
        Selects(), [((torch.randn(3, 3),), {})], warmup_iterations=1, out=tmp_path / "run"
    )
    assert "Tensor.__getitem__" in set(frame["function_name"])
    [entry] = _calls(tmp_path / "run", "Tensor.__getitem__")
    index = entry["args"]["tuple"][1]["object"]
    assert index["type"].endswith("Unprintable") and "RuntimeError" in index["repr"]
    with load_run(tmp_path / "run") as run:
        run.function_data(tensors=True)


class Unbound:
    """A proxy outside its context (werkzeug's LocalProxy, a lazy attribute): ``__class__``, a property that
    forwards to the proxied object, raises, and so does isinstance(proxy, C) for any C the proxy's type is not."""

    @property
    def __class__(self):
        raise RuntimeError("working outside of the proxied object's context")

    def __index__(self):
        return 1

    def __repr__(self):
        return "<Unbound proxy>"


class PassesAProxy(nn.Module):  # (torch refuses the proxy as a module attribute, and as an index)
    def forward(self, x, proxy):
        return F.softmax(x, dim=-1, _stacklevel=proxy) + F.softmax(x, dim=0, _stacklevel=[proxy, {"at": (proxy,)}])


MODULE_WITH_A_PROXY = """
import torch
from torch import nn
request = UNBOUND  # a proxy global of the model's module (flask's request): the recorder reads every global there

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


def test_a_proxy_whose_class_raises_is_recorded_as_an_argument_and_passed_over_as_a_global(tmp_path, monkeypatch):
    """isinstance on such a proxy raises: profile() raised the proxy's RuntimeError, as if the model had failed,
    from the scan of the model module's globals for stored functionals, and from the sample's key, size, metadata
    and JSON. Each now goes by the proxy's type alone: the calls are recorded, the proxy kept in function_data and
    written as an object with its repr."""
    proxy = Unbound()
    frame, data = ModuleFunctionKernelProfiler().profile(
        PassesAProxy(), [((torch.randn(3, 3), proxy), {})] * 2, warmup_iterations=1, out=tmp_path / "run"
    )
    assert [calls for calls, _ in data["softmax"]] == [2, 2]
    assert data["softmax"][0][1][1]["_stacklevel"] is proxy, "function_data keeps the live argument"
    written = {"object": {"type": f"{__name__}.Unbound", "repr": "<Unbound proxy>"}}
    first, second = (entry["kwargs"]["dict"][1][1] for entry in _calls(tmp_path / "run", "softmax"))
    assert first == written and second == {"list": [written, {"dict": [["at", {"tuple": [written]}]]}]}
    with load_run(tmp_path / "run") as run:
        assert [calls for calls, _ in run.function_data(tensors=True)["softmax"]] == [2, 2]
    module = types.ModuleType("model_with_a_proxy")
    module.UNBOUND = Unbound()
    exec(MODULE_WITH_A_PROXY, vars(module))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    frame, _ = ModuleFunctionKernelProfiler().profile(module.Model(), [((torch.randn(2),), {})], warmup_iterations=0)
    assert set(frame["function_name"]) == {"torch.relu"}


class Colliding:
    """An index whose hash is every instance's and whose ``__eq__`` raises (an object of a library that refuses to be
    compared, say): two of them in one dict meet on the collision."""

    def __index__(self):
        return 1

    def __hash__(self):
        return 7

    def __eq__(self, other):
        raise TypeError("not comparable")


class SelectsWithFreshIndexes(nn.Module):
    def forward(self, x):
        return (x * 2)[Colliding()] + x[Colliding()]


def test_an_argument_whose_eq_raises_on_a_hash_collision_is_keyed_by_its_identity(tmp_path):
    """The keying compares it with another argument of the same hash, which raised in the model's call."""
    profiler = ModuleFunctionKernelProfiler()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # fresh objects in every pass: the calls differ between passes
        frame, data = profiler.profile(
            SelectsWithFreshIndexes(), [((torch.randn(3, 3),), {})], warmup_iterations=3, out=tmp_path / "run"
        )
    assert "Tensor.__getitem__" in set(frame["function_name"])
    assert [calls for calls, _ in data["Tensor.__getitem__"]] == [1, 1], "each a distinct, unkeyable value"
    assert len(_calls(tmp_path / "run", "Tensor.__getitem__")) == 2


class IndexesWithNumpy(nn.Module):
    def forward(self, x):
        return x[np.arange(2)] * x[np.array([[0, 1]])]


def test_numpy_arrays_made_in_every_pass_are_keyed_by_their_layout_not_their_identity(tmp_path):
    profiler = ModuleFunctionKernelProfiler()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame, data = profiler.profile(
            IndexesWithNumpy(), [((torch.randn(4, 4),), {})], warmup_iterations=3, out=tmp_path / "run"
        )
    assert not [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert profiler.run.manifest["sample_keys"] == "predicted"
    assert [calls for calls, _ in data["Tensor.__getitem__"]] == [1, 1], "two arrays of two shapes"


class ReshapesInPlace(nn.Module):
    """relu's and gelu's inputs are transposed in place after their calls, the same way in every pass."""

    def forward(self, x):
        h = x.clone()
        y = torch.nn.functional.relu(h)
        h.t_()
        g = x.clone()
        z = torch.nn.functional.gelu(g)
        g.unsqueeze_(0)
        return y, z


def test_inputs_reshaped_in_place_after_their_call_are_described_as_they_were_at_the_call(tmp_path):
    profiler = ModuleFunctionKernelProfiler()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # recorded once: the warm-up showed the reshapes
        frame, data = profiler.profile(
            ReshapesInPlace(), [((torch.randn(2, 3),), {})], warmup_iterations=1, out=tmp_path / "run"
        )
    assert profiler.run.manifest["sample_keys"] == "predicted"
    for name, shape, stride in [("relu", [2, 3], [3, 1]), ("gelu", [2, 3], [3, 1])]:
        [entry] = _calls(tmp_path / "run", name)
        assert entry["args"]["tuple"][0]["tensor"]["shape"] == shape, name
        assert entry["args"]["tuple"][0]["tensor"]["stride"] == stride, name


class CallsTwiceInItsSecondPass(nn.Module):
    """Its second pass (the recorded one, after one warm-up) calls relu once more than the others, as a thread of
    the program's own might."""

    def __init__(self):
        super().__init__()
        self.passes = 0

    def forward(self, x):
        self.passes += 1
        return [torch.nn.functional.relu(x) for _ in range(2 if self.passes == 2 else 1)]


def test_calls_that_differ_in_one_pass_only_are_not_taken_for_inputs_changed_in_place():
    with pytest.warns(RuntimeWarning, match="the model's calls differed between the warm-up passes and the recorded"):
        ModuleFunctionKernelProfiler().profile(
            CallsTwiceInItsSecondPass(), [((torch.randn(2, 3),), {})], warmup_iterations=1
        )


class SeesItsCalls(torch.Tensor):
    """A tensor subclass of the program's own, which torch.load(weights_only=True) does not know."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class Densifies(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x.to_dense() if x.layout == torch._mkldnn else x)


@pytest.mark.parametrize(
    "make", [lambda x: x.as_subclass(SeesItsCalls), lambda x: x.to_mkldnn()], ids=["subclass", "mkldnn"]
)
def test_inputs_of_a_tensor_subclass_or_mkldnn_are_saved_so_that_the_analyzer_reads_them_back(tmp_path, make):
    x = torch.randn(2, 8)
    ModuleFunctionKernelProfiler().profile(Densifies(), [((make(x),), {})], warmup_iterations=1, out=tmp_path / "run")
    with load_run(tmp_path / "run") as run:
        stored = run.function_data(tensors=True)
    for name in ["gelu"] + (["Tensor.to_dense"] if "Tensor.to_dense" in stored else []):  # to_dense: the MKLDNN one
        [(_, ((tensor,), _))] = stored[name]
        assert type(tensor) is torch.Tensor and torch.equal(tensor, x), f"{name}: the values, as a plain tensor"


class ReadsOneStorageAsTwoDtypes(nn.Module):
    """Calls given a tensor and a view of its storage as another dtype (complex as real, float bits as int)."""

    def __init__(self, view):
        super().__init__()
        self.view = view

    def forward(self, x):
        return F.gelu(self.view(x).float()), torch.abs(x)


@pytest.mark.parametrize(
    "view", [torch.view_as_real, lambda x: x.view(torch.int32)], ids=["view_as_real", "view_as_int32"]
)
def test_inputs_viewing_one_storage_as_two_dtypes_are_saved(tmp_path, view):
    x = torch.randn(4, 8, dtype=torch.complex64) if view is torch.view_as_real else torch.randn(4, 8)
    ModuleFunctionKernelProfiler().profile(
        ReadsOneStorageAsTwoDtypes(view), [((x,), {})], warmup_iterations=1, out=tmp_path / "run"
    )
    with load_run(tmp_path / "run") as run:
        stored = run.function_data(tensors=True)
    [(_, ((abs_input,), _))] = stored["torch.abs"]
    assert abs_input.dtype == x.dtype and torch.equal(abs_input, x)
    viewed = [args[0] for entries in stored.values() for _, (args, _) in entries if args[0].dtype != x.dtype]
    assert viewed and all(torch.equal(t, view(x)) for t in viewed if t.shape == view(x).shape)


class WrapsATensor(torch.Tensor):
    """A __torch_dispatch__ wrapper subclass, whose own storage holds no data (its data pointer raises)."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, strides=inner.stride())

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda t: t.inner if isinstance(t, WrapsATensor) else t  # noqa: E731
        out = func(*torch.utils._pytree.tree_map(unwrap, args), **torch.utils._pytree.tree_map(unwrap, kwargs or {}))
        return torch.utils._pytree.tree_map(lambda t: WrapsATensor(t) if isinstance(t, torch.Tensor) else t, out)


class Unwrapped(nn.Module):
    def forward(self, x):
        return F.relu(WrapsATensor(x)).inner + F.gelu(x)


def test_inputs_of_a_wrapper_subclass_are_saved_with_the_others(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ModuleFunctionKernelProfiler().profile(Unwrapped(), [((torch.randn(2, 8),), {})], warmup_iterations=1,
                                               out=tmp_path / "run")  # fmt: skip
    assert not [str(w.message) for w in caught if "samples.pt leaves" in str(w.message)]
