"""Programs for cpu_sweep.py around what a program does to its modules between and inside the recorded calls that the
other sweep files leave out: forward pre-hooks and hooks registered around each call and removed after it (as peft
enables its adapters' hooks for one generate), a global hook registered for one call, a submodule's forward swapped
for one call (as accelerate's hooks wrap a forward), and a parent that looks at its child's forward
(``inspect.signature``, ``inspect.ismethod``, ``forward.__self__``) before it calls it, as transformers does.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import contextlib
import functools
import inspect

import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, Net, _w
from torch import nn

# --- hooks registered for one call ----------------------------------------------------------------------------------


def _scaled_input(module, args):
    return (F.softsign(args[0]),)


def _normalized(module, args, out):
    return F.normalize(out, dim=-1)


@contextlib.contextmanager
def _adapters_enabled(model: Net):
    """Pre-hooks and a hook on some submodules for the duration of one call, removed after it."""
    handles = [model.a.fc1.register_forward_pre_hook(_scaled_input), model.b.register_forward_hook(_normalized)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def hooks_registered_per_call():
    model = Net().eval()

    def call(x):
        with _adapters_enabled(model):
            return model(x)

    return _w("hooks_registered_per_call", model, fn=call, description="a pre-hook on a Linear and a hook on a block "
              "registered before each call and removed after it (every one registered while recorded)",
              modules={"softsign": {"a.fc1"}, "normalize": {"b"}, "linear": {"a.fc1", "a.fc2", "b.fc1", "b.fc2",
                                                                               "head"}})  # fmt: skip


def global_hook_per_call():
    from torch.nn.modules import module as module_globals

    model = Net().eval()

    def call(x):
        handle = module_globals.register_module_forward_hook(
            lambda m, args, out: F.hardtanh(out) if isinstance(m, nn.LayerNorm) else None)  # fmt: skip
        try:
            return model(x)
        finally:
            handle.remove()

    return _w("global_hook_per_call", model, fn=call, description="a global forward hook registered before each "
              "call and removed after it, replacing LayerNorm outputs (in their scope)",
              modules={"hardtanh": {"a.norm", "b.norm"}, "gelu": {"a", "b"}}, calls={"hardtanh": 2})  # fmt: skip


# --- a forward swapped for one call ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _forward_wrapped(module: nn.Module):
    """accelerate's way: the module's forward replaced by a partial over a new forward that runs work before and after
    the old one (its signature and name kept by update_wrapper), put back afterwards."""
    had_own, old = "forward" in vars(module), module.forward

    def new_forward(module, *args, **kwargs):
        return F.mish(old(F.softsign(args[0]), *args[1:], **kwargs))

    module.forward = functools.update_wrapper(functools.partial(new_forward, module), old)
    try:
        yield
    finally:
        if had_own:
            module.forward = old
        else:
            del module.forward


class SwapsForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Net()

    def forward(self, x):
        with _forward_wrapped(self.net.b):
            return self.net(x)


def forward_swapped_per_call():
    return _w("forward_swapped_per_call", SwapsForward().eval(), description="a block's forward replaced inside "
              "the parent's forward by an accelerate-like partial (work before and after the old forward), put back "
              "after the call", modules={"softsign": {"net.b"}, "mish": {"net.b"}, "gelu": {"net.a", "net.b"}},
              calls={"mish": 1})  # fmt: skip


# --- a child's forward looked at before it is called ----------------------------------------------------------------


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x, attention_mask=None):
        y = self.fc(x)
        return y if attention_mask is None else F.softmax(y.masked_fill(attention_mask, -1e4), dim=-1)


class LooksAtForward(nn.Module):
    """Passes a mask only to a child whose bound forward takes one, as transformers' generate() asks
    ``inspect.signature(self.forward)``; falls back to another computation otherwise."""

    def __init__(self):
        super().__init__()
        self.body, self.masked = Mlp(), Masked()

    def forward(self, x):
        forward = self.masked.forward
        takes_mask = "attention_mask" in inspect.signature(forward).parameters
        if takes_mask and inspect.ismethod(forward) and forward.__self__ is self.masked:
            return self.masked(self.body(x), attention_mask=x < 0)
        return F.hardshrink(self.masked(self.body(x)))


def inspects_child_forward():
    return _w("inspects_child_forward", LooksAtForward().eval(), description="a parent that reads its child's "
              "forward (inspect.signature, inspect.ismethod, __self__) to choose what to pass it",
              modules={"softmax": {"masked"}, "hardshrink": set(), "linear": {"body.fc1", "body.fc2", "masked.fc"}},
              calls={"softmax": 1})  # fmt: skip


UNSEEN6_MECHANISMS = {f.__name__: f for f in (
    hooks_registered_per_call, global_hook_per_call, forward_swapped_per_call, inspects_child_forward,
)}  # fmt: skip
