"""A scoped call that a __torch_function__ handler takes swaps the namespaces' wrapper for the original only where
a handler may compare ``func`` with the public name: never for torch's DeviceContext alone (a default device, ``with
torch.device(...)``), which is around every call of such a program, so that another thread's call in that instant
stays scoped."""

import pytest

torch = pytest.importorskip("torch")
from kernelscope.recorder import identity_handlers  # noqa: E402
from kernelscope.recorder.identity_handlers import may_compare_by_identity  # noqa: E402
from torch import nn  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402


class Logged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class Passing(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_only_handlers_other_than_device_context_may_compare_by_identity():
    x = torch.ones(2)
    with torch.device("cpu"):
        assert not may_compare_by_identity((x, 1.0, nn.Parameter(x)), {"eps": 1e-5}), "DeviceContext alone"
        assert may_compare_by_identity((x.as_subclass(Logged),), {})
        assert may_compare_by_identity(([x, x.as_subclass(Logged)],), {}), "a subclass inside a list argument"
        assert may_compare_by_identity((x,), {"weight": x.as_subclass(Logged)})
        with Passing():
            assert may_compare_by_identity((x,), {})


def test_the_namespace_keeps_the_wrapper_under_a_default_device_alone():
    """What another thread finds in the namespace while a handled call runs: the wrapper under DeviceContext alone
    (it was the original: a worker thread's F.layer_norm went unscoped and its inner torch.layer_norm named its
    rows, seen on an H100 with cpu_sweep.py --device cuda), the original under another mode."""
    namespace = {}

    def original(x):
        seen.append(namespace["fn"])
        return x

    def wrapper(x):
        return original(x)

    namespace["fn"] = wrapper
    identity_handlers._SITES[id(wrapper)] = [(namespace, "fn", original, wrapper)]
    try:
        seen, x = [], torch.ones(1)
        with torch.device("cpu"):
            identity_handlers.dispatched(original, wrapper, (x,), {}, set())
            with Passing():
                identity_handlers.dispatched(original, wrapper, (x,), {}, set())
        assert seen == [wrapper, original]
        assert namespace["fn"] is wrapper, "put back after the call"
    finally:
        del identity_handlers._SITES[id(wrapper)]


_SEEN: list = []


def _what_a_handler_sees(func: object) -> tuple:
    import torch.nn.functional as F  # noqa: N812

    known = {torch.add: "add", F.linear: "linear", torch.Tensor.add: "Tensor.add", torch.Tensor.mul: "Tensor.mul",
             F.layer_norm: "layer_norm", torch.linalg.vector_norm: "vector_norm"}  # fmt: skip
    return known.get(func), torch.overrides.resolve_name(func)


class NamesEveryCall(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        _SEEN.append(_what_a_handler_sees(func))
        return func(*args, **(kwargs or {}))


class NamedTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        _SEEN.append(_what_a_handler_sees(func))
        return super().__torch_function__(func, types, args, kwargs or {})


class EveryNamespace(nn.Module):
    def __init__(self, subclass: bool):
        super().__init__()
        self.fc, self.subclass = nn.Linear(8, 8), subclass

    def forward(self, x):
        import torch.nn.functional as F  # noqa: N812

        _SEEN.append("pass")
        if self.subclass:
            x = x.as_subclass(NamedTensor)
        with NamesEveryCall() if not self.subclass else torch.no_grad():
            h = F.linear(torch.add(x, 1.0), self.fc.weight)
            h = F.layer_norm(h.add(1.0).mul(2.0) + 1.0, (8,))
            return torch.linalg.vector_norm(h * 3.0, dim=-1)


@pytest.mark.parametrize("subclass", [False, True], ids=["mode", "subclass"])
def test_a_handler_is_handed_torchs_own_function_in_every_patched_namespace(subclass):
    """A handler keyed by torch's functions (a dict of them, ``resolve_name``) sees each call while recorded as it
    does unrecorded: ``Tensor.add`` was the recorder's wrapper (torch looks a method up on ``torch.Tensor`` when it
    hands it to a handler), unknown to the dict and named None by ``resolve_name``."""
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    model, x = EveryNamespace(subclass).eval(), torch.randn(2, 8)
    _SEEN.clear()
    with torch.no_grad():
        model(x)
    unrecorded = list(_SEEN)
    assert ("Tensor.add", "torch.Tensor.add") in unrecorded and ("linear", "torch.nn.functional.linear") in unrecorded
    _SEEN.clear()
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((x,), {})], warmup_iterations=1)
    recorded = _SEEN[len(_SEEN) - _SEEN[::-1].index("pass") - 1 :]
    assert recorded[: len(unrecorded)] == unrecorded
    assert {"Tensor.add", "Tensor.mul", "torch.add", "linear"} <= set(frame["function_name"]), "still scoped"
