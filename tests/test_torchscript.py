"""TorchScript modules (recorder/torchscript.py): the operators a TorchScript module runs for its submodules belong to
those submodules, by the module paths torch.profiler writes for them (its args' Module Hierarchy), where they had all
been the TorchScript module's (or the root's, for a scripted or traced model); the rows are otherwise the reference's,
and the model's outputs are plain torch's."""

import io
import re

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from reference import load_events, reference_attribution, trace_calls  # noqa: E402
from torch import nn  # noqa: E402


@torch.jit.script
def doubled_tanh(x):
    return torch.tanh(x) * 2


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return doubled_tanh(F.gelu(self.fc(x)))


class Encoder(nn.Module):
    """A Sequential (which TorchScript writes a frame of), a ModuleList and a ModuleDict (which it writes none of)."""

    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(Inner(), nn.ReLU())
        self.layers = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
        self.heads = nn.ModuleDict({"out": nn.Linear(8, 8)})

    def forward(self, x):
        x = self.seq(x)
        for layer in self.layers:
            x = layer(x)
        return self.heads["out"](x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        x = torch.randn(2, 8)
        self.scripted, self.traced = torch.jit.script(Encoder()), torch.jit.trace(Inner(), (x,))
        self.head = nn.Linear(8, 8)

    def forward(self, x):
        return self.head(self.traced(self.scripted(x)))


_SEGMENT = re.compile(r"\.([^.()]*\([^()]*\))::")


def _rows(model, x, tmp_path):
    expected = model(x)
    ModuleFunctionKernelProfiler().profile(model, [((x,), {})], warmup_iterations=3, out=tmp_path / "run")
    assert torch.equal(model(x), expected)
    return load_run(tmp_path / "run")


@pytest.mark.parametrize("kind", ["eager model", "scripted model", "traced model"])
def test_the_operators_of_torchscript_modules_are_their_submodules(tmp_path, kind):
    model, x = Model().eval(), torch.randn(2, 8)
    if kind != "eager model":
        model = torch.jit.script(Encoder().eval()) if kind == "scripted model" else torch.jit.trace(Encoder(), (x,))
    root = "scripted." if kind == "eager model" else ""
    with _rows(model, x, tmp_path) as run:
        frame, manifest = run.profiling_df(), run.manifest
    paths = manifest["annotation"]["torchscript_modules"]
    assert set(paths) == ({"scripted", "traced"} if kind == "eager model" else {""})
    assert paths[root[:-1]]["seq(Sequential).0(Inner).fc(Linear)"] == f"{root}seq.0.fc"
    assert paths[root[:-1]]["0(Linear)"] == f"{root}layers.0" and paths[root[:-1]]["out(Linear)"] == f"{root}heads.out"
    linears = set(frame.loc[frame["op"] == "aten::addmm", "module_name"])
    expected = {f"{root}{name}" for name in ("seq.0.fc", "layers.0", "layers.1", "heads.out")}
    assert linears == expected | ({"traced.fc", "head"} if kind == "eager model" else set())
    assert set(frame.loc[frame["op"] == "aten::tanh", "module_name"]) <= {f"{root}seq.0"} | (
        {"traced"} if kind == "eager model" else set()
    ), "a TorchScript function's operators are the module's that called it"

    # the reference's rows but for module_name, which is the reference's extended by the path its operator names
    trace = tmp_path / "run" / manifest["files"]["trace"]
    reference = reference_attribution(trace, **trace_calls(trace))
    events = load_events(trace)
    assert sorted(frame["event_id"]) == sorted(reference)
    for row in frame.itertuples():
        want = reference[row.event_id]
        assert (row.op, row.kernel, row.kind) == (want["op"], want["kernel"], want["kind"])
        scope = want["module_name"] or ""
        hierarchy = events[row.event_id].get("args", {}).get("Module Hierarchy")
        path = ".".join(_SEGMENT.findall(hierarchy)) if hierarchy is not None else None
        assert row.module_name == paths.get(scope, {}).get(path, want["module_name"]), f"event {row.event_id}"


def test_an_eager_model_records_without_module_hierarchies(tmp_path):
    model, x = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval(), torch.randn(2, 8)
    with _rows(model, x, tmp_path) as run:
        assert "torchscript_modules" not in run.manifest["annotation"]
        assert run.sql("SELECT count(*) AS n FROM events WHERE contains(args, 'Module Hierarchy')").iloc[0, 0] == 0


def test_a_loaded_torchscript_model_keeps_its_modules_dicts(tmp_path):
    """A ScriptModule loaded from bytes fills its methods into a module's ``__dict__`` only when asked for them: the
    recorder reads every submodule's forward, and puts back the ``__dict__`` it found, not torch's cache."""
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(Encoder().eval()), buffer)
    buffer.seek(0)
    model, x = torch.jit.load(buffer), torch.randn(2, 8)
    expected = model(x)
    before = {name: dict(vars(module)) for name, module in model.named_modules()}
    ModuleFunctionKernelProfiler().profile(model, [((x,), {})], warmup_iterations=1)
    after = {name: dict(vars(module)) for name, module in model.named_modules()}
    assert after.keys() == before.keys()
    for name, attributes in before.items():
        assert after[name].keys() == attributes.keys(), name
        assert all(after[name][key] is value for key, value in attributes.items()), name
    assert torch.equal(model(x), expected)
