"""Programs for cpu_sweep.py around mechanisms the earlier program files leave out: children that are context managers
entered through an ``ExitStack``, ``ModuleTracker`` (global module hooks) read by the model, ``DataLoader`` workers
forked while recorded, module classes made by ``types.new_class`` or wrapped by a base's ``__init_subclass__``,
dataclass modules, a finalizer run by ``gc.collect()`` in a forward, children made by ``__getattr__`` at the first
call, ``Tensor.apply_``/``map_`` callbacks, deterministic algorithms switched in a forward, a forward that is a
descriptor of the program's own, a dropout switched to training in its parent's forward
(sweep_cpu_mechanisms_unseen14_tensors.py has the autograd, dispatch and tensor protocol ones).

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import types

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import _w
from torch import nn


def _fixed(linear: nn.Linear) -> nn.Linear:
    """Weights from a formula, not the random stream: a model made twice has the same weights."""
    with torch.no_grad():
        linear.weight.copy_(torch.linspace(-0.5, 0.5, linear.weight.numel()).view_as(linear.weight).cos())
        linear.bias.fill_(0.01)
    return linear


class Gate(nn.Module):
    """A module that is also a context manager: entering it runs it on the tensor it holds, leaving it gates it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.held = None

    def forward(self, x):
        return F.gelu(self.fc(x))

    def __enter__(self):
        self.out = self(self.held)
        return self

    def __exit__(self, *exc):
        self.out = F.sigmoid(self.out) * self.out
        return False


class ContextChildren(nn.Module):
    def __init__(self):
        super().__init__()
        self.gates = nn.ModuleList([Gate(), Gate()])

    def forward(self, x):
        with contextlib.ExitStack() as stack:
            for gate in self.gates:
                gate.held = x
                stack.enter_context(gate)
        return self.gates[0].out + self.gates[1].out


def modules_as_context_managers():
    # ExitStack leaves the gates in reverse order, after both forwards ran inside __enter__
    return _w("modules_as_context_managers", ContextChildren().eval(), description="children that are context "
              "managers, entered through a contextlib.ExitStack: each runs itself in __enter__ and calls a "
              "functional in __exit__, outside its forward", modules={"gelu": {"gates.0", "gates.1"}},
              calls={"sigmoid": 2})  # fmt: skip


class TrackerDepth(nn.Module):
    def __init__(self, tracker):
        super().__init__()
        self.__dict__["tracker"] = tracker
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return F.relu(self.fc(x)) * len(self.tracker.parents)  # the module path ModuleTracker sees here


class TrackedModel(nn.Module):
    def __init__(self, tracker):
        super().__init__()
        self.inner, self.outer = TrackerDepth(tracker), nn.Linear(16, 16)

    def forward(self, x):
        return self.outer(self.inner(x))


def module_tracker_parents():
    from torch.utils.module_tracker import ModuleTracker

    tracker = ModuleTracker()
    model = TrackedModel(tracker).eval()

    def tracked(x):
        with tracker:
            return model(x)

    return _w("module_tracker_parents", model, fn=tracked, description="torch.utils.module_tracker.ModuleTracker "
              "(global module hooks) active around the model, which multiplies by the number of parents it reports",
              modules={"relu": {"inner"}})  # fmt: skip


class NormalizedRows(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return F.normalize(torch.randn(16, generator=torch.Generator().manual_seed(i)), dim=0)


def dataloader_workers():
    model = nn.Sequential(nn.Linear(16, 16), nn.Tanh()).eval()
    loader = torch.utils.data.DataLoader(NormalizedRows(), batch_size=4, num_workers=2,
                                         multiprocessing_context="fork")  # fmt: skip

    def epoch():
        return torch.cat([model(batch) for batch in loader])

    return _w("dataloader_workers", model, fn=epoch, samples=[((), {})], description="a DataLoader with two forked "
              "workers (their dataset calls F.normalize) iterated in the profiled function, every pass",
              modules={"torch.tanh": {"1"}})  # fmt: skip


def _made_body(namespace):
    def __init__(self):  # noqa: N807
        nn.Module.__init__(self)
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return F.silu(self.fc(x))

    namespace.update(__init__=__init__, forward=forward)


class CountingMeta(type):
    made = 0

    def __call__(cls, *args, **kwargs):
        CountingMeta.made += 1
        return super().__call__(*args, **kwargs)


class NewClassModel(nn.Module):
    def __init__(self):
        super().__init__()
        plain = types.new_class("Made", (nn.Module,), {}, _made_body)  # __module__ is "types", its maker's
        counted = types.new_class("Counted", (nn.Module,), {"metaclass": type("Meta", (CountingMeta, type(
            nn.Module)), {})}, _made_body)  # fmt: skip
        self.plain, self.counted = plain(), counted()

    def forward(self, x):
        return self.counted(self.plain(x))


def new_class_modules():
    return _w("new_class_modules", NewClassModel().eval(), description="module classes made by types.new_class "
              "(their __module__ is 'types'), one with a metaclass keyword",
              modules={"silu": {"plain", "counted"}})  # fmt: skip


class LayerNormed(nn.Module):
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        inner = cls.forward

        def forward(self, *args, **kw):  # no functools.wraps: the class's forward is this closure
            return F.layer_norm(inner(self, *args, **kw), (16,))

        cls.forward = forward


class GeluBlock(LayerNormed):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return F.gelu(self.fc(x))


class DoubledBlock(GeluBlock):
    def forward(self, x):
        return super().forward(x) * 2


class SubclassWrapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = GeluBlock(), DoubledBlock()

    def forward(self, x):
        return self.b(self.a(x))


def init_subclass_wrapped_forwards():
    # DoubledBlock's forward is wrapped, and its super().forward is GeluBlock's wrapped one: two layer norms in b
    return _w("init_subclass_wrapped_forwards", SubclassWrapped().eval(), description="a base class whose "
              "__init_subclass__ replaces every subclass's forward with a closure around it (a subclass calling "
              "super().forward)", calls={"layer_norm": 3, "gelu": 2},
              modules={"layer_norm": {"a", "b"}, "gelu": {"a", "b"}})  # fmt: skip


@dataclasses.dataclass(eq=False)  # eq=False keeps nn.Module's identity hash
class ScaledLayer(nn.Module):
    width: int
    scale: float = 2.0
    extra: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        super().__init__()
        self.fc = nn.Linear(self.width, self.width)

    def forward(self, x):
        return F.gelu(self.fc(x)) * self.scale


class DataclassModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = ScaledLayer(16), ScaledLayer(16, scale=0.5)

    def forward(self, x):
        return self.second(self.first(x))


def dataclass_modules():
    return _w("dataclass_modules", DataclassModel().eval(), description="modules that are dataclasses (fields set "
              "before nn.Module.__init__, which __post_init__ calls; the dataclass's own __repr__)",
              modules={"gelu": {"first", "second"}})  # fmt: skip


class Releasing:
    def __init__(self, tensor, into):
        self.tensor, self.into, self.cycle = tensor, into, self

    def __del__(self):
        self.into.append(F.softsign(self.tensor))


class Finalized(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        released = []
        Releasing(self.fc(x), released)  # a reference cycle: only the collector frees it
        gc.collect()
        return released[0] + x


def finalizers_in_forward():
    return _w("finalizers_in_forward", Finalized().eval(), description="a finalizer (__del__ of a reference cycle) "
              "calling a functional, run by gc.collect() in the forward", calls={"softsign": 1},
              modules={"softsign": {""}})  # fmt: skip


class MadeOnAccess(nn.Module):
    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if not name.startswith("head_"):
                raise
        made = nn.Sequential(_fixed(nn.Linear(16, 16)), nn.Tanh())
        self._modules[name] = made  # add_module's hasattr check would call this __getattr__ again
        return made

    def forward(self, x):
        return self.head_a(x) + self.head_b(F.relu(x))


def children_made_on_first_access():
    return _w("children_made_on_first_access", MadeOnAccess().eval(), description="children made and registered by "
              "the module's __getattr__ at the first call (profile() makes it)", fresh=lambda: MadeOnAccess().eval(),
              modules={"torch.tanh": {"head_a.1", "head_b.1"}})  # fmt: skip


class Callbacks(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(x).detach()
        codes = h.clone().apply_(lambda v: math.floor(v * 4) / 4)
        return F.relu(codes.map_(h, lambda a, b: max(a, b)))


def tensor_apply_callbacks():
    return _w("tensor_apply_callbacks", Callbacks().eval(), description="Tensor.apply_ and Tensor.map_ calling "
              "Python callables per element", modules={"relu": {""}})  # fmt: skip


class DeterministicScatter(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 16)

    def forward(self, idx):
        before = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            h = self.emb(idx)
            sums = torch.empty(8, 16).zero_().index_add_(0, idx % 8, h)
            peak = torch.zeros(8, 16).scatter_reduce(0, (idx % 8).unsqueeze(1).expand(-1, 16), h, "amax")
        finally:
            torch.use_deterministic_algorithms(before)
        return F.layer_norm(sums + peak, (16,))


def deterministic_algorithms_toggled():
    return _w("deterministic_algorithms_toggled", DeterministicScatter().eval(),
              samples=[((torch.randint(0, 32, (12,)),), {})], description="torch.use_deterministic_algorithms "
              "switched on and back in the forward around index_add_ and scatter_reduce",
              modules={"embedding": {"emb"}})  # fmt: skip


class ModeForward:
    """A descriptor of the program's own as a class's forward: the instance's mode picks the function it binds."""

    def __init__(self, training, evaluating):
        self.training, self.evaluating = training, evaluating

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return types.MethodType(self.training if obj.training else self.evaluating, obj)


def _train_forward(self, x):
    return F.dropout(F.gelu(self.fc(x)), 0.5, True)


def _eval_forward(self, x):
    return F.gelu(self.fc(x))


class Described(nn.Module):
    forward = ModeForward(_train_forward, _eval_forward)

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)


class DescribedModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Described(), Described()

    def forward(self, x):
        return self.b(self.a(x))


def descriptor_forward():
    return _w("descriptor_forward", DescribedModel().eval(), description="a class whose forward is a descriptor "
              "object of the program's own that binds the eval or the train function by the instance's mode",
              modules={"gelu": {"a", "b"}}, calls={"dropout": 0})  # fmt: skip


class MonteCarlo(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.drop = nn.Linear(16, 16), nn.Dropout(0.5)

    def forward(self, x):
        self.drop.train(True)  # Monte Carlo dropout: on at inference, whatever eval() set
        return self.drop(F.gelu(self.fc(x)))


def dropout_train_set_in_forward():
    model = MonteCarlo().eval()

    def seeded(x):
        torch.manual_seed(0)
        return model(x)

    return _w("dropout_train_set_in_forward", model, fn=seeded, description="an eval-mode model whose forward "
              "switches its dropout child to training (Monte Carlo dropout), seeded per call",
              modules={"dropout": {"drop"}}, calls={"dropout": 1})  # fmt: skip


UNSEEN14_MECHANISMS = {f.__name__: f for f in (
    modules_as_context_managers, module_tracker_parents, dataloader_workers, new_class_modules,
    init_subclass_wrapped_forwards, dataclass_modules, finalizers_in_forward, children_made_on_first_access,
    tensor_apply_callbacks, deterministic_algorithms_toggled, descriptor_forward, dropout_train_set_in_forward,
)}  # fmt: skip
