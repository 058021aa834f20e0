"""Programs for cpu_sweep.py around distributed wrappers, higher-order ops, export and TorchScript that the other
sweep files leave out: DTensor (parallelize_module, DTensor inputs and parameters) and DistributedDataParallel with
collectives on a one-rank gloo group; ``map``, ``associative_scan`` and ``torch.cond`` with submodules, eager and
compiled; ``nested_compile_region``; ``run_decompositions()``; a strict export with a dynamic batch through a file;
``torch.jit.optimize_for_inference``, ``trace_module`` with two methods, a ``@torch.jit.ignore``d Python method; a
dynamically quantized LSTM and GRU.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import tempfile

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, Net, _w, _x
from torch import nn

# --- distributed on one rank ----------------------------------------------------------------------------------------


def _one_rank_group():
    import torch.distributed as dist

    if not dist.is_available():
        raise RuntimeError("torch.distributed is not available")
    if not dist.is_initialized():
        store = dist.HashStore()
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    return dist


def _destroy():
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def dtensor_tensor_parallel():
    _one_rank_group()
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (1,))
    model = parallelize_module(Mlp().eval(), mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    return _w("dtensor_tensor_parallel", model, cleanup=_destroy, description="parallelize_module (Colwise, Rowwise) "
              "on a one-rank gloo mesh: DTensor weights", modules={"gelu": {""}})  # fmt: skip


class Reduces(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        import torch.distributed as dist
        from torch.distributed._functional_collectives import all_reduce

        y = self.mlp(x)
        dist.all_reduce(y)
        return all_reduce(F.relu(y), "sum", dist.group.WORLD).wait() if hasattr(torch.Tensor, "wait") else y


def ddp_and_collectives():
    _one_rank_group()
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(Reduces().eval())
    return _w("ddp_and_collectives", model, cleanup=_destroy, description="DistributedDataParallel on one gloo rank; "
              "all_reduce and a functional all_reduce in the forward",
              modules={"gelu": {"module.mlp"}})  # fmt: skip


def dtensor_inputs():
    _one_rank_group()
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (1,))
    model = Net().eval()
    for name, param in list(model.named_parameters()):
        owner = model.get_submodule(name.rpartition(".")[0])
        setattr(owner, name.rpartition(".")[2], nn.Parameter(distribute_tensor(param.detach(), mesh, [Replicate()])))
    x = distribute_tensor(_x(), mesh, [Shard(0)])
    return _w("dtensor_inputs", model, samples=[((x,), {})], cleanup=_destroy, description="DTensor inputs "
              "(sharded) and replicated DTensor parameters", modules={"gelu": {"a", "b"}})  # fmt: skip


# --- higher-order ops -----------------------------------------------------------------------------------------------


class Mapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner, self.head = Mlp(), nn.Linear(16, 4)

    def forward(self, xs):
        from torch._higher_order_ops.map import map as hop_map

        return self.head(hop_map(lambda x, scale: F.softplus(self.inner(x)) * scale, xs, torch.tensor(0.5)))


def hop_map_eager():
    return _w("hop_map_eager", Mapped().eval(), samples=[((_x(3, 4, 16),), {})], description="the map higher-order "
              "op over a submodule, eager (torch compiles its body: the modules inside get no scope of their own)",
              modules={"linear": {"head"}})  # fmt: skip


class Scanned(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        from torch._higher_order_ops.associative_scan import associative_scan

        return associative_scan(lambda a, b: a + b, F.sigmoid(self.fc(x)), dim=0, combine_mode="generic")


def associative_scan_eager():
    return _w("associative_scan_eager", Scanned().eval(), description="associative_scan (generic mode), eager",
              modules={"sigmoid": {""}, "linear": {"fc"}})  # fmt: skip


class Branches(nn.Module):
    def __init__(self):
        super().__init__()
        self.yes, self.no = Mlp(), Mlp()

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: F.relu(self.yes(t)), lambda t: F.gelu(self.no(t)), (x,))


def cond_compiled_submodules():
    return _w("cond_compiled_submodules", torch.compile(Branches().eval(), backend="aot_eager"),
              samples=[((_x().abs(),), {}), ((-_x().abs(),), {})],
              description="torch.cond with submodules in its branches, compiled")  # fmt: skip


def cond_eager_submodules():
    return _w("cond_eager_submodules", Branches().eval(), samples=[((_x().abs(),), {}), ((-_x().abs(),), {})],
              description="torch.cond with submodules in its branches, eager (torch compiles the branches: the modules "
              "inside get no scope of their own)")  # fmt: skip


class Region(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    @torch.compiler.nested_compile_region
    def forward(self, x):
        return F.mish(self.fc(x))


class Regions(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = Region(), Region()

    def forward(self, x):
        return self.second(self.first(x))


def nested_compile_region_eager():
    return _w("nested_compile_region_eager", Regions().eval(), description="forwards marked "
              "nested_compile_region, eager", modules={"mish": {"first", "second"}})  # fmt: skip


def nested_compile_region_compiled():
    return _w("nested_compile_region_compiled", torch.compile(Regions().eval(), backend="aot_eager"),
              description="forwards marked nested_compile_region (invoke_subgraph), compiled")  # fmt: skip


# --- export and TorchScript -----------------------------------------------------------------------------------------


def export_decomposed():
    program = torch.export.export(Net().eval(), (_x(),)).run_decompositions()
    return _w("export_decomposed", program.module(), description="ExportedProgram.run_decompositions().module()")


def export_strict_dynamic_file():
    batch = torch.export.Dim("batch", min=2, max=16)
    program = torch.export.export(Net().eval(), (_x(),), dynamic_shapes={"x": {0: batch}}, strict=True)
    with tempfile.TemporaryDirectory() as tmp:
        torch.export.save(program, f"{tmp}/net.pt2")
        loaded = torch.export.load(f"{tmp}/net.pt2")
    return _w("export_strict_dynamic_file", loaded.module(), samples=[((_x(n, 16),), {}) for n in (3, 7)],
              description="strict export with a dynamic batch, saved to a file and loaded")  # fmt: skip


def jit_optimized_for_inference():
    model = torch.jit.optimize_for_inference(torch.jit.script(Net().eval()))
    return _w("jit_optimized_for_inference", model, description="torch.jit.optimize_for_inference")


class TwoMethods(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        return self.mlp(x)

    def encode(self, x):
        return F.softmax(self.mlp(x), -1)


def jit_trace_module_methods():
    traced = torch.jit.trace_module(TwoMethods().eval(), {"forward": (_x(),), "encode": (_x(),)})

    class Calls(nn.Module):
        def __init__(self):
            super().__init__()
            self.traced = traced

        def forward(self, x):
            return self.traced.encode(x) + self.traced(x)

    return _w("jit_trace_module_methods", Calls().eval(), description="torch.jit.trace_module: forward and another "
              "traced method called by an eager parent")  # fmt: skip


class IgnoredInside(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    @torch.jit.ignore
    def python_part(self, x):  # unannotated: TorchScript takes Tensors
        return F.hardswish(x) + F.softplus(x)

    def forward(self, x):
        return self.python_part(self.fc(x))


def jit_ignored_python():
    return _w("jit_ignored_python", torch.jit.script(IgnoredInside().eval()), description="a scripted module calling "
              "a @torch.jit.ignore'd Python method that calls functionals",
              calls={"hardswish": 1, "softplus": 1})  # fmt: skip


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm, self.gru, self.head = nn.LSTM(16, 16, 2, batch_first=True), nn.GRU(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, _ = self.gru(y)
        return self.head(F.relu(y))


def quantized_dynamic_recurrent():
    model = torch.ao.quantization.quantize_dynamic(Recurrent().eval(), {nn.LSTM, nn.GRU, nn.Linear}, torch.qint8)
    return _w("quantized_dynamic_recurrent", model, samples=[((_x(2, 5, 16),), {})],
              description="quantize_dynamic of LSTM, GRU and Linear")  # fmt: skip


UNSEEN4_GRAPH_MECHANISMS = {f.__name__: f for f in (
    dtensor_tensor_parallel, ddp_and_collectives, dtensor_inputs, hop_map_eager, associative_scan_eager,
    cond_compiled_submodules, cond_eager_submodules, nested_compile_region_eager, nested_compile_region_compiled,
    export_decomposed, export_strict_dynamic_file, jit_optimized_for_inference, jit_trace_module_methods,
    jit_ignored_python, quantized_dynamic_recurrent,
)}  # fmt: skip
