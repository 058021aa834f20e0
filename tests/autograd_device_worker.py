"""Run by tests/test_threads_autograd.py in a process of its own: autograd's engine runs the backward functions of a
device other than the CPU (and the Python hooks they call) on a worker thread of its own, made at the process's
first backward for each device type then registered. CPU torch has no such device, so this registers one: a Python
backend ('ksdev') whose tensors hold a CPU tensor and run every operator on it, which the engine counts as a device
with a worker thread as it counts CUDA. Prints one JSON object of what the hooks saw. With ``--kept-key``, runs as
under a torch that cannot take a key of its thread-local objects away (before 2.12)."""

import contextlib
import json
import sys
import tempfile
import threading
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from kernelscope.analyzer import load_run
from kernelscope.recorder import ModuleFunctionKernelProfiler, calls, torch_tracing
from kernelscope.recorder.threads import model_threads
from reference import assert_matches_reference
from torch import nn
from torch.utils._pytree import tree_map

torch.utils.backend_registration._setup_privateuseone_for_python_backend("ksdev")


class OnDevice(torch.Tensor):
    """A CPU tensor seen as on ksdev:0."""

    @staticmethod
    def __new__(cls, data, requires_grad=False):
        tensor = torch.Tensor._make_wrapper_subclass(
            cls, data.shape, dtype=data.dtype, device="ksdev:0", requires_grad=requires_grad
        )
        tensor.held = data
        return tensor

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        held = func(*tree_map(_held, args), **tree_map(_held, kwargs or {}))
        return tree_map(lambda value: OnDevice(value) if isinstance(value, torch.Tensor) else value, held)


def _held(value):
    return value.held if isinstance(value, OnDevice) else value


def backward_seen(x: torch.Tensor, hook) -> torch.Tensor:
    """The gradient of ``(2 * x).sum()`` on ksdev, with ``hook`` a pre-hook of the product's backward."""
    with torch.enable_grad():
        on_device = OnDevice(x.detach(), requires_grad=True)
        product = on_device * 2
        product.grad_fn.register_prehook(hook)
        (grad,) = torch.autograd.grad(product.sum(), on_device)
    return grad.held


class GradInForward(nn.Module):
    """A forward that runs autograd, whose backward hook calls F.normalize (on the device's worker thread)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.hook_threads: set[int] = set()

    def forward(self, x):
        return self.fc(backward_seen(x, self.hook))

    def hook(self, grads):
        self.hook_threads.add(threading.get_ident())
        return (F.normalize(grads[0], dim=-1),)


class GradStep(torch.autograd.Function):
    """A Function whose forward takes a gradient (a solver's step): that backward starts inside its apply's call."""

    @staticmethod
    def forward(ctx, x, hook):
        return backward_seen(x, hook)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class GradInCall(GradInForward):
    def forward(self, x):
        return self.fc(GradStep.apply(x, self.hook))


class Host(nn.Module):
    def __init__(self):
        super().__init__()
        self.grad = GradInCall()

    def forward(self, x):
        return self.grad(x)


class ToDevice(torch.autograd.Function):
    """A CPU tensor onto ksdev: its backward hands the gradient back to the CPU."""

    @staticmethod
    def forward(ctx, x):
        return OnDevice(x.detach().clone())

    @staticmethod
    def backward(ctx, grad):
        return grad.held.clone()


class MixedBackward(GradInForward):
    """A backward whose last node (the CPU leaf's AccumulateGrad) runs on the starting thread, not the worker."""

    def forward(self, x):
        with torch.enable_grad():
            leaf = x.detach().requires_grad_()
            product = ToDevice.apply(leaf) * 2
            product.grad_fn.register_prehook(self.hook)
            product.sum().backward()
        return self.fc(leaf.grad)


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.mixed = MixedBackward()

    def forward(self, x):
        return self.mixed(x)


def worker_rows(model: nn.Module) -> list:
    """(module, call) of the rows a backward the model starts inside its scopes has on the device's worker thread."""
    with tempfile.TemporaryDirectory() as out:
        run = Path(out) / "run"
        frame, _ = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 8),), {})], out=run)
        with load_run(run) as loaded:  # the SQL attribution of the worker's reopened scopes, as the reference's
            assert_matches_reference(loaded, run / "trace.json.gz")
    on_worker = frame[frame["thread"] != threading.get_native_id()]
    rows = zip(on_worker["module_name"], on_worker["function_name"], strict=True)
    return sorted({(str(module), str(call)) for module, call in rows})


def other_thread_in_hook() -> bool:
    """Whether the recording leaves alone the calls of a hook of a backward this thread runs."""
    seen = []
    backward_seen(torch.randn(3), lambda grads: seen.append(calls.INSIDE_CALL.get() is calls.OTHER_THREAD
                                                            and calls.on_other_thread()))  # fmt: skip
    return seen == [True]


def key_on_a_started_thread() -> bool:
    """Whether a thread started inside the recording holds the key while it runs."""
    held = []
    with model_threads():
        started = threading.Thread(target=lambda: held.append(torch._C._is_key_in_tls(calls.SCOPED_KEY)))
        started.start()
        started.join(10)
    return held == [True]


def main() -> None:
    if "--kept-key" in sys.argv:
        calls.REMOVES_KEY = False
    seen = {"main": threading.get_ident(), "key on a started thread": key_on_a_started_thread()}
    server_asks, server_answers = threading.Event(), []

    def server():  # started before the recording: its backward is not the model's
        server_asks.wait(10)
        server_answers.append(other_thread_in_hook())

    started = threading.Thread(target=server)
    started.start()
    with model_threads():
        seen["scoped backward left alone"] = other_thread_in_hook()
        with torch_tracing._aside(contextlib.nullcontext()):  # as inside torch.export's tracing
            seen["backward aside left alone"] = other_thread_in_hook()
        server_asks.set()
        started.join(10)
    seen["server backward left alone"] = server_answers == [True]
    seen["backward after the recording left alone"] = other_thread_in_hook()
    model = GradInForward()
    with tempfile.TemporaryDirectory() as out:
        frame, data = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 8),), {})],
                                                             out=Path(out) / "run")  # fmt: skip
    seen["hooks on a worker"] = seen["main"] not in model.hook_threads and len(model.hook_threads) == 1
    seen["normalize calls"] = [count for count, _ in data.get("normalize", [])]
    seen["normalize rows"] = int((frame["function_name"] == "normalize").sum())
    seen["worker rows"] = worker_rows(Host())
    seen["mixed worker rows"] = worker_rows(Mixed())
    json.dump(seen, sys.stdout)


if __name__ == "__main__":
    main()
