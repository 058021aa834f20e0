"""Mechanisms at the edges for cpu_sweep.py: nn.Module.compile() in place, custom dynamo backends, exported programs
unflattened, frozen TorchScript and TorchScript forks, functionals held where no reference scan looks (a class
attribute, a closure, a config object), torch.cond, pruning, DataParallel on the CPU, gradients taken inside the
forward, recurrent layers on packed sequences, the fast path of nn.TransformerEncoder, static quantization, sparse
inputs, modules that delegate their attributes (as adapter libraries do), submodules swapped while recorded, a model
in training mode, a thread pool made in the forward; objects whose own methods raise when the recorder reads them,
and lazy results held in a forward's result."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, Net, _w, _x
from torch import nn


def module_compile_in_place():
    model = Net().eval()
    model.b.compile(backend="eager")
    return _w("module_compile_in_place", model, description="nn.Module.compile() of a submodule (in place)")


def _backend(gm, example_inputs):
    return gm.forward  # the graph's own Python code runs


def compile_custom_backend():
    model = torch.compile(Net().eval(), backend=_backend)
    return _w("compile_custom_backend", model, description="torch.compile with a backend of the user's own")


def export_unflatten():
    program = torch.export.export(Net().eval(), (_x(),))
    model = torch.export.unflatten(program)
    return _w("export_unflatten", model, description="torch.export.unflatten: the hierarchy rebuilt")


def export_compiled():
    model = torch.compile(torch.export.export(Net().eval(), (_x(),)).module(), backend="inductor")
    return _w("export_compiled", model, description="an exported program's module(), compiled")


def jit_freeze():
    model = torch.jit.freeze(torch.jit.script(Net().eval()))
    return _w("jit_freeze", model, description="torch.jit.freeze of a scripted model")


@torch.jit.script
def _scripted_gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x) * 2


class Forks(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        future = torch.jit.fork(self.a, x)
        return _scripted_gelu(self.b(x)) + torch.jit.wait(future)


def jit_fork_and_function():
    return _w("jit_fork_and_function", Forks().eval(), description="torch.jit.fork, a scripted function")


def _make_act():
    act = F.silu
    return lambda x: act(x)


class Cfg:
    def __init__(self):
        self.act = F.gelu


class HiddenFunctionals(nn.Module):
    ACT = F.softplus  # a class attribute (a builtin: no binding)

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.closure = _make_act()
        self.cfg = Cfg()

    def forward(self, x):
        return self.cfg.act(self.closure(self.ACT(self.fc(x))))


def hidden_functionals():
    return _w("hidden_functionals", HiddenFunctionals().eval(),
              description="functionals in a class attribute, a closure, a config object")  # fmt: skip


class Cond(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: F.relu(self.a(t)), lambda t: F.gelu(self.b(t)), (x,))


def torch_cond():
    samples = [((_x().abs(),), {}), ((-_x().abs(),), {})]
    return _w("torch_cond", Cond().eval(), samples=samples, description="torch.cond in an eager forward")


def pruned():
    import torch.nn.utils.prune  # noqa: F401 (not imported by torch.nn.utils)

    model = Net().eval()
    torch.nn.utils.prune.l1_unstructured(model.a.fc1, "weight", amount=0.5)
    torch.nn.utils.prune.random_structured(model.head, "weight", amount=0.5, dim=0)
    return _w("pruned", model, description="torch.nn.utils.prune (forward pre-hooks)")


def data_parallel():
    model = nn.DataParallel(Net().eval())
    return _w("data_parallel", model, description="nn.DataParallel without GPUs")


class GradInside(nn.Module):
    def __init__(self):
        super().__init__()
        self.energy = Mlp()

    def forward(self, x):
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            (g,) = torch.autograd.grad(self.energy(x).square().sum(), x)
        return g


def grad_inside():
    return _w("grad_inside", GradInside().eval(), description="torch.autograd.grad inside forward (enable_grad)")


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm, self.gru = nn.LSTM(16, 16, batch_first=True, num_layers=2), nn.GRU(16, 16, batch_first=True)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        padded, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        return self.gru(padded)[0]


def recurrent_packed():
    x, lengths = torch.randn(3, 7, 16), torch.tensor([7, 3, 5])
    return _w("recurrent_packed", Recurrent().eval(), samples=[((x, lengths), {})],
              description="LSTM on a packed sequence, GRU")  # fmt: skip


def transformer_fast_path():
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    x, padding = torch.randn(3, 6, 16), torch.tensor([[False] * 6, [False] * 4 + [True] * 2, [False] * 2 + [True] * 4])
    return _w("transformer_fast_path", model, samples=[((x,), {"src_key_padding_mask": padding})],
              description="nn.TransformerEncoder's fast path with a padding mask (nested tensors)")  # fmt: skip


class Quantizable(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant, self.dequant = torch.ao.quantization.QuantStub(), torch.ao.quantization.DeQuantStub()
        self.conv, self.relu, self.fc = nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Linear(8 * 6 * 6, 4)

    def forward(self, x):
        return self.dequant(self.fc(self.relu(self.conv(self.quant(x))).flatten(1)))


def quantized_static():
    model = Quantizable().eval()
    model.qconfig = torch.ao.quantization.get_default_qconfig("fbgemm")
    prepared = torch.ao.quantization.prepare(model)
    x = torch.randn(2, 3, 8, 8)
    prepared(x)
    converted = torch.ao.quantization.convert(prepared)
    return _w("quantized_static", converted, samples=[((x,), {})], description="eager static quantization")


class SparseIn(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 8))

    def forward(self, adjacency, x):
        return torch.sparse.mm(adjacency, x @ self.w)


def sparse_inputs():
    adjacency = (torch.rand(16, 16) > 0.8).float().to_sparse()
    return _w("sparse_inputs", SparseIn().eval(), samples=[((adjacency, torch.randn(16, 16)), {})],
              description="a sparse COO input, torch.sparse.mm")  # fmt: skip


class Adapter(nn.Module):
    """Delegates unknown attributes to the layer it wraps, as adapter libraries do."""

    def __init__(self, base: nn.Linear):
        super().__init__()
        self.base_layer, self.down, self.up = base, nn.Linear(16, 4, bias=False), nn.Linear(4, 16, bias=False)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.base_layer, name)

    def forward(self, x):
        return self.base_layer(x) + self.up(self.down(x)) * 0.5


def adapters():
    model = Net().eval()
    model.a.fc2 = Adapter(nn.Linear(32, 16))
    model.a.fc2.down = nn.Linear(32, 4, bias=False)
    model.b.fc1 = Adapter(model.b.fc1)
    model.b.fc1.up = nn.Linear(4, 32, bias=False)
    return _w("adapters", model, description="LoRA-like adapters that delegate attributes")


class Swaps(nn.Module):
    def __init__(self):
        super().__init__()
        self.act, self.fc = nn.ReLU(), nn.Linear(16, 16)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        self.act = nn.GELU() if self.calls % 2 else nn.ReLU()  # a new submodule every call
        return self.act(self.fc(x))


def swaps_submodules():
    return _w("swaps_submodules", Swaps().eval(), description="a submodule replaced in every forward")


class Training(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.bn, self.drop = Mlp(), nn.BatchNorm1d(16), nn.Dropout(0.3)

    def forward(self, x):
        torch.manual_seed(0)
        return self.drop(self.bn(self.mlp(x)))


def training_mode():
    return _w("training_mode", Training().train(), description="training mode: dropout, batch norm statistics")


class Pooled(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList(Mlp() for _ in range(3))

    def forward(self, x):
        with ThreadPoolExecutor(2) as pool:
            outs = list(pool.map(functools.partial(lambda head, t: head(t), t=x), self.heads))
        return torch.stack(outs)


def thread_pool():
    return _w("thread_pool", Pooled().eval(), description="a ThreadPoolExecutor made in the forward")


# --- objects that misbehave when read, and lazy results held in a result ------------------------------------------


class _Unreadable(list):
    """A list whose own methods raise (torch reads its items without them)."""

    def __iter__(self):
        raise RuntimeError("not to be iterated")

    def __len__(self):
        raise RuntimeError("no length")


class _Proxy:
    """An object outside its context: its __class__, equality, hash and attributes raise."""

    @property
    def __class__(self):
        raise RuntimeError("outside its context")

    def __eq__(self, other):
        raise RuntimeError("outside its context")

    __hash__ = None

    def __getattr__(self, name):
        raise RuntimeError("outside its context")


_UNREADABLE_GLOBAL = _Unreadable([F.gelu])  # a global of the model's code: the scan of stored references reads it


class _ReturnsAProxy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return F.relu(self.fc(x)), _Proxy()


class Hostile(nn.Module):
    def __init__(self):
        super().__init__()
        self.child, self.act, self.held = _ReturnsAProxy(), F.gelu, _Unreadable([F.gelu])

    def forward(self, x):
        y, _ = self.child(x)
        return self.act(torch.cat(_Unreadable([y, x])))


def hostile_objects():
    return _w("hostile_objects", Hostile().eval(), description="list subclasses whose own methods raise as an "
              "argument, an attribute and a global; a child returning an object whose __class__ raises",
              modules={"relu": {"child"}, "gelu": {""}, "torch.cat": {""}})  # fmt: skip


class _Rows(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return (F.mish(self.fc(row)) for row in x), map(F.softsign, x)


class HeldLazyResults(nn.Module):
    def __init__(self):
        super().__init__()
        self.rows = _Rows()

    def forward(self, x):
        rows, signs = self.rows(x)
        return torch.stack([F.tanh(r) for r in rows]) + torch.stack(list(signs))


def held_lazy_results():
    return _w("held_lazy_results", HeldLazyResults().eval(), description="a forward returning a generator and a map "
              "in a tuple, iterated by its parent", modules={"mish": {"rows"}, "softsign": {"rows"}, "tanh": {""}},
              calls={"mish": 4, "softsign": 4, "tanh": 4})  # fmt: skip


EDGE_MECHANISMS = {f.__name__: f for f in (
    module_compile_in_place, compile_custom_backend, export_unflatten, export_compiled, jit_freeze,
    jit_fork_and_function, hidden_functionals, torch_cond, pruned, data_parallel, grad_inside, recurrent_packed,
    transformer_fast_path, quantized_static, sparse_inputs, adapters, swaps_submodules, training_mode, thread_pool,
    hostile_objects, held_lazy_results,
)}  # fmt: skip
