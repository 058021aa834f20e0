import json
import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
REPO = TESTS.parent
SHARED_TRACES = sorted((REPO / "sample_traces" / "plain_kineto").glob("*.json.gz"))
SAMPLE_RUNS = sorted(p.parent for p in (REPO / "sample_traces").glob("*/manifest.json"))

sys.path.insert(0, str(TESTS))
# pytest-xdist's workers get COLUMNS=80 and LINES=24 (execnet sets them), which a piped table's width follows: the
# tests that want a width set COLUMNS themselves, the rest print as on a machine that has none.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

from torch_required import pytest_make_collect_report, pytest_runtest_makereport  # noqa: E402, F401 (hooks)


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


@pytest.fixture(scope="session")
def demo_command(tmp_path_factory):
    """``kernelscope demo --out demo-run`` run once (the README's first command, on the CPU here): the folder it
    ran in and what it printed, shared by the tests of the command and of the README."""
    pytest.importorskip("torch")
    from click.testing import CliRunner
    from kernelscope.cli import main

    folder = tmp_path_factory.mktemp("demo-command")
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(main, ["demo", "--out", "demo-run"], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    return folder, result.output


@pytest.fixture(scope="session")
def layouts_run(tmp_path_factory):
    """One CPU recording of a tiny model whose calls take a sliced, a transposed and an expanded tensor, make
    torch-level calls, and one of whose inputs passes the sample memory cap: shared by the bench tests."""
    torch = pytest.importorskip("torch")
    from kernelscope.recorder import ModuleFunctionKernelProfiler
    from layouts_model import LayoutsModel

    torch.manual_seed(0)
    model = LayoutsModel().eval()
    x = torch.randn(16, 32)
    samples = [((x,), {}), ((torch.randn(16, 32),), {}), ((torch.randn(8, 32),), {})]
    out = tmp_path_factory.mktemp("layouts") / "run"
    profiler = ModuleFunctionKernelProfiler(sample_memory_limit_mb=0.5)
    with pytest.warns(RuntimeWarning, match="were not kept"):
        profiler.profile(model, samples, warmup_iterations=1, out=out)
    return profiler, out


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


def tagged_copy(source: Path, target: Path, tags: dict) -> Path:
    """A copy of a run directory whose manifest carries ``tags`` (hence another run id in an archive)."""
    import json
    import shutil

    shutil.copytree(source, target)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["tags"] = tags
    (target / "manifest.json").write_text(json.dumps(manifest))
    return target


def snapshot_patch_targets(model) -> tuple[dict, dict]:
    """What the recorder patches: every torch.nn.functional attribute, and each module's ``__dict__``."""
    import torch.nn.functional as F  # noqa: N812

    return dict(vars(F)), {name: dict(vars(module)) for name, module in model.named_modules()}


def assert_patches_undone(model, before: tuple[dict, dict]) -> None:
    """Every patch undone exactly: the same torch.nn.functional attributes and module attributes, each
    the identical object it was, and no instance ``forward`` left on any module."""
    from kernelscope.recorder.instrument import functional_names

    functional, modules = before
    now_functional, now_modules = snapshot_patch_targets(model)
    assert set(functional_names()) <= functional.keys(), "every F.<name> the recorder patches is compared"
    assert now_functional.keys() == functional.keys(), "torch.nn.functional gained or lost attributes"
    assert all(now_functional[k] is v for k, v in functional.items()), "a torch.nn.functional attribute changed"
    assert now_modules.keys() == modules.keys()
    for name, attributes in modules.items():
        assert now_modules[name].keys() == attributes.keys(), f"module {name!r} gained or lost attributes"
        assert all(now_modules[name][k] is v for k, v in attributes.items()), f"module {name!r} changed"
        assert "forward" not in now_modules[name], f"module {name!r} keeps an instance forward"


# The columns that say where a device event's time went: two loads of one trace's events agree on them row by row.
ATTRIBUTION_COLUMNS = ["kernel", "kind", "op", "call_op", "function_name", "module_name", "kernel_us"]


def assert_rows_as_original(run, original) -> None:
    """``run``'s rows are ``original``'s, event by event, in every column of ATTRIBUTION_COLUMNS (a trace rewritten
    in another shape that must read as the one it came from)."""
    ours, theirs = (
        r.profiling_df().sort_values("event_id")[ATTRIBUTION_COLUMNS].reset_index(drop=True) for r in (run, original)
    )
    assert ours.equals(theirs)


def assert_reads_as_original(doc: dict, path: Path, original: Path) -> None:
    """``doc`` written to ``path`` reads as the trace ``original`` it was rewritten from: the reference's rows, and
    ``original``'s rows and launch check."""
    from kernelscope.analyzer import load_run
    from reference import assert_matches_reference

    path.write_text(json.dumps(doc))
    with load_run(original) as theirs, load_run(path) as ours:
        assert_matches_reference(ours, path)
        assert_rows_as_original(ours, theirs)
        assert ours.launch_check() == theirs.launch_check()
