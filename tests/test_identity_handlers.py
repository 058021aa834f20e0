"""A scoped call that a __torch_function__ handler takes swaps the namespaces' wrapper for the original only where
a handler may compare ``func`` with the public name: never for torch's DeviceContext alone (a default device, ``with
torch.device(...)``), which is around every call of such a program, so that another thread's call in that instant
stays scoped."""

import pytest

torch = pytest.importorskip("torch")
from kernelscope.recorder import wrappers  # noqa: E402
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
    wrappers._MODULE_SITES[id(wrapper)] = [(namespace, "fn")]
    try:
        seen, x = [], torch.ones(1)
        with torch.device("cpu"):
            wrappers._dispatched(original, wrapper, (x,), {}, set())
            with Passing():
                wrappers._dispatched(original, wrapper, (x,), {}, set())
        assert seen == [wrapper, original]
        assert namespace["fn"] is wrapper, "put back after the call"
    finally:
        del wrappers._MODULE_SITES[id(wrapper)]
