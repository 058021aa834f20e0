"""Programs for cpu_sweep.py around forwards reached in odd ways and hooks or modules that change while the model
runs: a ``functools.singledispatchmethod`` forward, a child made by a ``functools.cached_property`` (never
registered), a forward under the user's own decorators (a ``functools.wraps`` timer, a retry, a
``contextlib.contextmanager``), the user's own ``record_function`` regions, ``load_state_dict`` inside a forward,
global hooks and one-shot pre-hooks written into the hook dicts around each call or at the first call of the recorded
pass, hooks taking kwargs and always called, a forward set by ``object.__setattr__`` at each call, ``torch.export``
inside a forward, a ``torch.compile``d function called inside a module, modules built inside the forward at each
call, a child cast to float64 around each call, a ``ModuleDict`` keyed by integers as strings, channels_last
convolutions under bfloat16 autocast.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import contextlib
import functools
import time

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, _w, _x
from torch import nn


class Dispatching(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    @functools.singledispatchmethod
    def forward(self, x):
        raise TypeError(type(x))

    @forward.register
    def _(self, x: torch.Tensor):
        return F.gelu(self.fc(x))

    @forward.register
    def _(self, x: tuple):
        return sum(self.forward(item) for item in x)


def singledispatch_forward():
    return _w("singledispatch_forward", Dispatching().eval(), samples=[((_x(),), {}), (((_x(), _x()),), {})],
              description="forward is a functools.singledispatchmethod: a tensor, or a tuple dispatched item by "
              "item through self.forward", modules={"linear": {"fc"}, "gelu": {""}}, calls={"gelu": 3})  # fmt: skip


class CachedChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    @functools.cached_property
    def proj(self):  # cached_property writes the instance __dict__: never registered, so never observed
        return nn.Linear(16, 8)

    def forward(self, x):
        return self.proj(F.silu(self.fc(x)))


def cached_property_child():
    return _w("cached_property_child", CachedChild().eval(),
              description="a child Linear made at the first call by a functools.cached_property (not in _modules)",
              modules={"linear": {"", "fc"}, "silu": {""}}, calls={"linear": 2, "silu": 1})  # fmt: skip


def _timed(forward):
    @functools.wraps(forward)
    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return forward(self, *args, **kwargs)
        finally:
            self.elapsed.append(time.perf_counter() - start)
            del self.elapsed[:-4]

    return timed


def _retried(times: int):
    def decorate(forward):
        @functools.wraps(forward)
        def retried(*args, **kwargs):
            for attempt in range(times):
                try:
                    return forward(*args, **kwargs)
                except FloatingPointError:
                    if attempt == times - 1:
                        raise
            return None

        return retried

    return decorate


@contextlib.contextmanager
def _normalized(x):
    yield F.layer_norm(x, x.shape[-1:])


class Decorated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.elapsed = nn.Linear(16, 16), []

    @_timed
    @_retried(2)
    def forward(self, x):
        with _normalized(x) as y:
            return F.gelu(self.fc(y))


def user_decorated_forward():
    return _w("user_decorated_forward", Decorated().eval(),
              description="forward under the user's functools.wraps timer and retry decorators, a "
              "contextlib.contextmanager normalizing its input", modules={"layer_norm": {""}, "gelu": {""},
              "linear": {"fc"}}, calls={"layer_norm": 1, "gelu": 1})  # fmt: skip


class UserRegions(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        with torch.profiler.record_function("user.encode"):
            h = self.mlp(x)
            with torch.profiler.record_function("user.pool"):
                h = F.adaptive_avg_pool1d(h.unsqueeze(1), 8).squeeze(1)
        return torch.profiler.record_function("user.head")(lambda: F.softmax(F.pad(h, (4, 4)) @ self.head.weight.T,
                                                                             -1))()  # fmt: skip


def user_record_function():
    return _w("user_record_function", UserRegions().eval(),
              description="the user's own torch.profiler.record_function regions, nested, around modules and calls, "
              "and one as a decorator", modules={"adaptive_avg_pool1d": {""}, "gelu": {"mlp"}, "softmax": {""},
              "linear": {"mlp.fc1", "mlp.fc2"}}, calls={"adaptive_avg_pool1d": 1, "softmax": 1})  # fmt: skip


class ReloadsItsWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.norm = nn.Linear(16, 16), nn.LayerNorm(16)
        self.saved = {key: value.clone() for key, value in self.fc.state_dict().items()}

    def forward(self, x):
        self.fc.load_state_dict(self.saved)  # a reset before each call, as an adapter swap does
        return self.norm(F.relu(self.fc(x)))


def load_state_dict_in_forward():
    return _w("load_state_dict_in_forward", ReloadsItsWeights().eval(),
              description="load_state_dict of a child inside the forward at each call (parameters copied in place)",
              modules={"linear": {"fc"}, "relu": {""}, "layer_norm": {"norm"}}, calls={"relu": 1})  # fmt: skip


class GlobalHookAroundEachCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Mlp(), Mlp()

    def forward(self, x):
        hooks = nn.modules.module._global_forward_hooks
        hooks[90_001] = lambda module, args, out: F.hardtanh(out) if isinstance(module, nn.LayerNorm) else None
        try:
            return self.b(self.a(x))
        finally:
            del hooks[90_001]


def global_hook_dict_each_call():
    return _w("global_hook_dict_each_call", GlobalHookAroundEachCall().eval(), warmup=0,
              description="a global forward hook written into torch's global hook dict around each call (no "
              "registration), with no warm-up: the hook's call in the scope of the LayerNorm it fires for",
              modules={"hardtanh": {"a.norm", "b.norm"}, "gelu": {"a", "b"}}, calls={"hardtanh": 2})  # fmt: skip


class OneShotPreHook(nn.Module):
    """Scales its input by a pre-hook it arms at each call and that removes itself when it fires (a lazy
    calibration's pattern)."""

    def __init__(self):
        super().__init__()
        self.mlp, self.head = Mlp(), nn.Linear(16, 4)
        self.scale, self.handle = torch.ones(16), None

    def _calibrate(self, module, args):
        self.scale = F.softplus(args[0]).mean(0)
        self.handle.remove()
        self.handle = None

    def forward(self, x):
        if self.handle is None:
            self.handle = self.mlp.register_forward_pre_hook(self._calibrate)
        return self.head(self.mlp(x) * self.scale)


def one_shot_pre_hook():
    return _w("one_shot_pre_hook", OneShotPreHook().eval(), warmup=0,
              description="a pre-hook armed at each call that removes itself when it fires, with no warm-up",
              modules={"softplus": {"mlp"}, "linear": {"mlp.fc1", "mlp.fc2", "head"}},
              calls={"softplus": 1})  # fmt: skip


class KwargsHooks(nn.Module):
    def __init__(self):
        super().__init__()
        self.block, self.head = Gated(), nn.Linear(16, 4)
        self.block.register_forward_pre_hook(lambda m, args, kwargs: (args, {**kwargs, "gate": F.sigmoid(args[0])}),
                                             with_kwargs=True)  # fmt: skip
        self.block.register_forward_hook(lambda m, args, kwargs, out: F.tanh(out) + kwargs["gate"],
                                         with_kwargs=True, always_call=True)  # fmt: skip

    def forward(self, x):
        return self.head(self.block(x, gate=None))


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x, gate=None):
        return self.fc(x) * gate


def kwargs_always_call_hooks():
    return _w("kwargs_always_call_hooks", KwargsHooks().eval(),
              description="a pre-hook with_kwargs that rewrites a keyword argument and a forward hook with_kwargs "
              "and always_call", modules={"sigmoid": {"block"}, "tanh": {"block"}, "linear": {"block.fc", "head"}},
              calls={"sigmoid": 1, "tanh": 1})  # fmt: skip


class SetsForwardEachCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.child, self.head = nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        plain = type(self.child).forward.__get__(self.child)
        object.__setattr__(self.child, "forward", functools.partial(lambda y: plain(F.hardswish(y))))
        try:
            return self.head(self.child(x))
        finally:
            del self.child.forward


def forward_set_each_call():
    return _w("forward_set_each_call", SetsForwardEachCall().eval(), warmup=0,
              description="a child's forward set by object.__setattr__ (no nn.Module.__setattr__) to a partial "
              "around each call, and deleted after", modules={"hardswish": {"child"}, "linear": {"child", "head"}},
              calls={"hardswish": 1})  # fmt: skip


class ExportsItsEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        program = torch.export.export(self.encoder, (x,))
        return self.head(F.silu(program.module()(x)))


def export_in_forward():
    return _w("export_in_forward", ExportsItsEncoder().eval(), warmup=1,
              description="torch.export.export of a child inside the forward at each call, the exported program "
              "run (a module the model was not given): export's tracing is not the model's calls",
              modules={"linear": {"head"}, "silu": {""}}, calls={"linear": 1, "silu": 1})  # fmt: skip


@torch.compile(backend="eager")
def _gated_gelu(x, y):
    return F.gelu(x) * torch.sigmoid(y)


class CallsCompiled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.gate = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        return _gated_gelu(self.fc(x), self.gate(x))


def compiled_function_in_module():
    return _w("compiled_function_in_module", CallsCompiled().eval(),
              description="a torch.compile'd function (backend eager) called inside a module: its cache lookup and "
              "region are the call torch.compile", modules={"linear": {"fc", "gate"}, "torch.compile": {""},
              "(other operator)": set()})  # fmt: skip


class BuildsModulesEachCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.randn(16, 16))
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        made = nn.Sequential(nn.Linear(16, 16, bias=False), nn.ReLU())
        with torch.no_grad():
            made[0].weight.copy_(self.w)
        return self.norm(made(x))


def modules_made_each_call():
    return _w("modules_made_each_call", BuildsModulesEachCall().eval(),
              description="an nn.Sequential of a Linear and a ReLU built inside the forward at every call (never "
              "observed: its calls are the building module's)", modules={"linear": {""}, "relu": {""},
              "layer_norm": {"norm"}}, calls={"linear": 1, "relu": 1})  # fmt: skip


class CastsAroundEachCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.child, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, x):
        self.child.to(torch.float64)  # float32 -> float64 -> float32 is exact: the same weights at every call
        try:
            return self.head(self.child(x.double()).float())
        finally:
            self.child.to(torch.float32)


def child_cast_each_call():
    return _w("child_cast_each_call", CastsAroundEachCall().eval(),
              description="a child cast to float64 for its call and back after, at every call (its parameters "
              "change dtype while recorded)", modules={"linear": {"child.fc1", "child.fc2", "head"},
              "gelu": {"child"}}, calls={"linear": 3})  # fmt: skip


class IntKeyedExperts(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleDict({str(i): nn.Linear(16, 16) for i in range(4)})

    def forward(self, x, routes):
        return sum(self.experts[str(int(i))](x) for i in routes)


def int_keyed_module_dict():
    return _w("int_keyed_module_dict", IntKeyedExperts().eval(), samples=[((_x(), torch.tensor([0, 2])), {})],
              description="a ModuleDict keyed by integers as strings, chosen by a tensor's values at each call",
              modules={"linear": {"experts.0", "experts.2"}}, calls={"linear": 2})  # fmt: skip


class ChannelsLastAutocast(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.to(memory_format=torch.channels_last)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = F.silu(self.bn(self.conv(x.contiguous(memory_format=torch.channels_last))))
        return self.pool(y.float()).flatten(1)


def channels_last_autocast():
    return _w("channels_last_autocast", ChannelsLastAutocast().eval(), samples=[((_x(2, 3, 8, 8),), {})],
              description="channels_last Conv2d and BatchNorm2d under CPU autocast to bfloat16",
              modules={"conv2d": {"conv"}, "batch_norm": {"bn"}, "silu": {""}},
              calls={"conv2d": 1, "silu": 1})  # fmt: skip


UNSEEN9_MECHANISMS = {
    "singledispatch_forward": singledispatch_forward, "cached_property_child": cached_property_child,
    "user_decorated_forward": user_decorated_forward, "user_record_function": user_record_function,
    "load_state_dict_in_forward": load_state_dict_in_forward, "global_hook_dict_each_call": global_hook_dict_each_call,
    "one_shot_pre_hook": one_shot_pre_hook, "kwargs_always_call_hooks": kwargs_always_call_hooks,
    "forward_set_each_call": forward_set_each_call, "export_in_forward": export_in_forward,
    "compiled_function_in_module": compiled_function_in_module, "modules_made_each_call": modules_made_each_call,
    "child_cast_each_call": child_cast_each_call, "int_keyed_module_dict": int_keyed_module_dict,
    "channels_last_autocast": channels_last_autocast,
}  # fmt: skip
