"""torch.compile'd code inside a recording runs what it compiled without the recorder.

Compiled code guards the identity of the functions it traced (``F.linear``): patched, they would fail the guards and
dynamo would compile the model again inside the recorded pass, through the wrappers (graph breaks, and the compiled
block's kernels owned by eager ``linear`` calls). The backend here is ``eager`` (dynamo's guards and graphs, no C++
compile); the GPU check records the same with inductor and CUDA graphs (benchmarks/workloads.py).
"""

import pytest

torch = pytest.importorskip("torch")
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


class Host(nn.Module):
    def __init__(self):
        super().__init__()
        body = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
        self.block = torch.compile(body, backend="eager")
        self.head = nn.Linear(16, 16)

    def forward(self, x):
        return self.head(self.block(x))


def _graphs() -> int:
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


@pytest.fixture
def host():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Host().eval()
    x = torch.randn(4, 16)
    with torch.no_grad():
        expected = model(x)  # compiled here, as the user runs it
    yield model, x, expected
    torch._dynamo.reset()


def _regions(profiler) -> set[str]:
    names = profiler.run.sql("SELECT DISTINCT name FROM events WHERE name LIKE 'Torch-Compiled Region%'")["name"]
    return set(names)


@pytest.mark.parametrize("calls", ["all", "functional"])
def test_a_compiled_block_runs_its_compiled_code_while_recorded(host, calls, tmp_path):
    model, x, expected = host
    graphs = _graphs()
    profiler = ModuleFunctionKernelProfiler(calls=calls)
    frame, _ = profiler.profile(model, [((x,), {})], out=tmp_path / "run")
    assert _graphs() == graphs, "nothing was compiled again"
    assert _regions(profiler) == {"Torch-Compiled Region: 0/0"}
    block = frame[frame["module_name"] == "block"]
    assert len(block) > 0 and set(block["function_name"]) == {"torch.compile"}
    assert set(frame.loc[frame["module_name"] == "head", "function_name"]) == {"linear"}
    with torch.no_grad():
        assert torch.equal(model(x), expected)
    assert _graphs() == graphs, "the user's compiled code is still valid afterwards"
    assert torch._dynamo.eval_frame._stance.skip_guard_eval_unsafe is False


def test_without_an_unpatched_warm_up_the_wrappers_step_aside_for_dynamo(host, tmp_path):
    """warmup_iterations < 3 patches from the first pass: dynamo compiles the block again, tracing through wrappers
    that call the patched function itself, so the graph is the model's and nothing fails."""
    model, x, expected = host
    graphs = _graphs()
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((x,), {})], warmup_iterations=1, out=tmp_path / "run")
    assert _graphs() == graphs + 1, "one compile, through the wrappers, and no graph break"
    block = frame[frame["module_name"] == "block"]
    assert len(block) > 0 and set(block["function_name"]) == {"torch.compile"}
    with torch.no_grad():
        assert torch.equal(model(x), expected)
    assert _graphs() == graphs + 1, "the user's own compiled entry matches again once the patches are undone"


def test_the_users_own_stance_is_left_alone(host, tmp_path):
    model, x, _ = host
    with torch.compiler.set_stance("force_eager"):
        frame, _ = ModuleFunctionKernelProfiler().profile(model, [((x,), {})], out=tmp_path / "run")
        assert torch._dynamo.eval_frame._stance.stance == "force_eager"
    assert len(frame) > 0


def _compiled_function(x, w):
    return nn.functional.gelu(nn.functional.linear(x, w))


class CallsACompiledFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 16))
        self.head = nn.Linear(16, 16)
        self.compiled = torch.compile(_compiled_function, backend="eager")

    def forward(self, x):
        return self.head(self.compiled(x, self.w))


@pytest.mark.parametrize("calls", ["all", "functional"])
def test_a_compiled_function_is_named_from_its_region(calls, tmp_path):
    """A torch.compile'd function has no scope of its own: its region's rows get the call torch.compile from the
    trace ("Torch-Compiled Region" around them) with calls="all"; with calls="functional" they stay unnamed."""
    from kernelscope.analyzer import load_run
    from reference import assert_matches_reference

    torch._dynamo.reset()
    model = CallsACompiledFunction().eval()
    x = torch.randn(4, 16)
    with torch.no_grad():
        model(x)
    frame, _ = ModuleFunctionKernelProfiler(calls=calls).profile(model, [((x,), {})], out=tmp_path / "run")
    region = frame[frame["call_op"].fillna("").str.startswith("Torch-Compiled Region")]
    assert len(region) > 0 and set(region["module_name"]) == {""}
    assert set(region["function_name"]) == ({"torch.compile"} if calls == "all" else {None})
    assert region["sample_id"].isna().all()
    assert set(frame.loc[frame["module_name"] == "head", "function_name"]) == {"linear"}
    with load_run(tmp_path / "run") as run:
        assert_matches_reference(run, tmp_path / "run" / "trace.json.gz")
        summary = run.describe().set_index("function_name")
    if calls == "all":
        assert summary.loc["torch.compile", "time_spent_us"] == pytest.approx(region["kernel_us"].sum())
    torch._dynamo.reset()
