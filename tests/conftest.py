import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
REPO = TESTS.parent
SHARED_TRACES = sorted((REPO / "sample_traces" / "plain_kineto").glob("*.json.gz"))
SAMPLE_RUNS = sorted(p.parent for p in (REPO / "sample_traces").glob("*/manifest.json"))

sys.path.insert(0, str(TESTS))


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """One CPU recording of the demo model, shared by the tests that only read it."""
    torch = pytest.importorskip("torch")
    from kernelscope.demo import demo_workload
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    model, samples = demo_workload("cpu", torch.float32)
    out = tmp_path_factory.mktemp("demo") / "run"
    profiler = ModuleFunctionKernelProfiler()
    profiling_df, function_data = profiler.profile(model, samples, warmup_iterations=1, out=out)
    return profiler, model, samples, profiling_df, function_data, out
