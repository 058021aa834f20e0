"""torch.fx GraphModules whose code calls a functional through ``torch._C._nn`` (fx writes ``F.gelu``, a C function
of that namespace, as ``torch._C._nn.gelu``, which the recording does not patch): their kernels were named after their
operators (``aten::gelu``) where the GraphModule ran its own code, as the model, made by ``symbolic_trace`` in a
forward, or kept in a plain list outside the model's modules. Its forward is one fx writes from the same graph with
those nodes holding the wrappers while recorded, put back afterwards."""

import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from reference import assert_matches_reference  # noqa: E402
from torch import nn  # noqa: E402


class Act(nn.Module):
    """Its trace calls its Linear as a module (a leaf, so no node is run node by node) and two C functionals."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return F.gelu(self.fc(x)) + F.softplus(x)


class TracesInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = Act()

    def forward(self, x):
        return torch.fx.symbolic_trace(self.act)(x)


class KeepsOutside(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.graphs = nn.Linear(8, 8), [torch.fx.symbolic_trace(Act())]  # no submodule of the model

    def forward(self, x):
        return self.graphs[0](self.fc(x))


def _graphs(model):
    return [m for m in (model, *getattr(model, "graphs", ())) if isinstance(m, torch.fx.GraphModule)]


@pytest.mark.parametrize("make", [lambda: torch.fx.symbolic_trace(Act()), TracesInForward, KeepsOutside])
def test_c_functionals_in_graph_module_code_are_named_once_predicted_and_put_back(make, tmp_path):
    model, x = make().eval(), torch.randn(2, 8)
    graphs = _graphs(model)
    before = [(type(g).forward, g.code) for g in graphs]
    call = vars(torch.fx.graph_module._WrappedCall)["__call__"]
    assert all("torch._C._nn.gelu" in code for _, code in before)
    expected = model(x)
    profiler = ModuleFunctionKernelProfiler()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        frame, data = profiler.profile(model, [((x,), {})], warmup_iterations=1, out=tmp_path / "run")
    named = set(frame["function_name"].dropna())
    assert {"gelu", "softplus", "linear"} <= named and not any(n.startswith("aten::") for n in named), named
    assert [calls for calls, _ in data["gelu"]] == [1] and profiler.run.manifest["sample_keys"] == "predicted"
    assert [(type(g).forward, g.code) for g in graphs] == before, "fx's forward and code put back"
    assert vars(torch.fx.graph_module._WrappedCall)["__call__"] is call
    assert torch.equal(model(x), expected)
    with load_run(tmp_path / "run") as run:
        assert_matches_reference(run, tmp_path / "run" / "trace.json.gz")


def _returns_graph(gm, example_inputs):
    return gm


def _returns_forward(gm, example_inputs):
    return gm.forward  # bound when it compiled: a class's forward set later does not reach it


@pytest.mark.parametrize("warmup", [1, 3])
@pytest.mark.parametrize("backend", [_returns_graph, _returns_forward, "eager"])
def test_the_graphs_a_backend_runs_as_python_name_their_c_functionals_and_run_their_own_code(backend, warmup, tmp_path):
    """A backend that runs dynamo's graph as Python (``return gm``, ``return gm.forward``, ``backend="eager"``): its
    C functionals (``torch._C._nn.gelu`` in its code) were named ``torch.compile``, the compiled region's, where the
    graph's ``F.layer_norm`` (read from the patched namespace) had its own name. The graph's forward runs code fx
    writes with the wrappers, swapped into the function the backend's result holds, under dynamo's ``disable``: no
    frame is compiled anew (a frame without an entry made a generate() loop fall back to module scopes only)."""
    from kernelscope.recorder.compiled_graphs import dynamo_graphs

    torch._dynamo.reset()
    model, x = torch.compile(Act().eval(), backend=backend), torch.randn(2, 8)
    with torch.no_grad():
        expected = model(x)  # compiled by the user's own call, as profile() runs it
    graphs = dynamo_graphs(torch.fx.GraphModule)
    before = [(type(g).forward, type(g).forward.__code__, dict(type(g).forward.__globals__)) for g in graphs]
    assert graphs and all("torch._C._nn.gelu" in g.code for g in graphs)
    profiler = ModuleFunctionKernelProfiler()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        frame, _ = profiler.profile(model, [((x,), {})], warmup_iterations=warmup, out=tmp_path / "run")
    named = set(frame["function_name"].dropna())
    assert {"gelu", "softplus", "linear", "torch.compile"} <= named and not any(n.startswith("aten::") for n in named)
    assert profiler.run.manifest["compiled_code"] == "kept"
    after = [(type(g).forward, type(g).forward.__code__, dict(type(g).forward.__globals__)) for g in graphs]
    assert after == before, "the graphs' code and globals put back"
    assert torch.equal(model(x), expected)
    with load_run(tmp_path / "run") as run:
        assert_matches_reference(run, tmp_path / "run" / "trace.json.gz")
