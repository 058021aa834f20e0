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


def make_job(directory: Path, runs: dict, world_size: int | None = None) -> Path:
    """A job directory made of sample runs: ``runs`` maps a rank to the run directory that plays it."""
    import json
    import shutil

    directory.mkdir(parents=True)
    for rank, source in runs.items():
        target = directory / f"rank-{rank}"
        shutil.copytree(source, target)
        manifest = json.loads((target / "manifest.json").read_text())
        manifest.update(rank=rank, world_size=world_size or len(runs), backend="nccl")
        (target / "manifest.json").write_text(json.dumps(manifest))
    return directory
