"""Layout guarantees: the analyzer half never needs torch, and the wheel carries every module."""

import ast
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from conftest import REPO, SHARED_TRACES

PACKAGES = {
    "kernelscope": REPO / "cli",
    "kernelscope.recorder": REPO / "recorder",
    "kernelscope.analyzer": REPO / "analyzer",
    "kernelscope.analyzer.report": REPO / "analyzer" / "report",
}

BLOCK_TORCH = """
import importlib.abc, sys
class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked in this test", name="torch")
sys.meta_path.insert(0, NoTorch())
"""


def test_analyzer_sources_never_import_torch():
    for path in (REPO / "analyzer").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            )
            assert not any(n == "torch" or n.startswith("torch.") for n in names), f"{path} imports torch"
            assert not any("recorder" in n for n in names), f"{path} imports the recorder"


def test_facade_and_analyzer_work_where_torch_cannot_be_imported():
    trace = next(p for p in SHARED_TRACES if p.name == "misc.json.gz")
    code = (
        BLOCK_TORCH
        + f"""
import kernelscope
assert "ModuleFunctionKernelProfiler" in dir(kernelscope)
import kernelscope.analyzer as analyzer
run = kernelscope.load_run({str(trace)!r}, module_prefix="probe:")
assert len(run.profiling_df()) == 13
from kernelscope.cli import main
try:
    kernelscope.ModuleFunctionKernelProfiler
except ImportError as exc:
    assert exc.name == "torch"
else:
    raise AssertionError("the recorder imported without torch?")
assert not any(m == "torch" or m.startswith("torch.") for m in sys.modules), "torch was loaded"
print("ok")
"""
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_cli_analyze_runs_without_torch():
    trace = next(p for p in SHARED_TRACES if p.name == "threads.json.gz")
    code = (
        BLOCK_TORCH
        + f"""
from kernelscope.cli import main
sys.argv = ["kernelscope", "analyze", {str(trace)!r}, "--kernels", "--format", "csv"]
main()
"""
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.strip().splitlines()) == 41


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple:
    """The wheel, and pip's log of its build: -v shows the build backend's warnings, which a user's pip (24 and
    later) prints even with -q."""
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    (path,) = out.glob("kernelscope-*.whl")
    return path, done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel(built):
    return built[0]


def test_the_build_leaves_no_folder_of_a_package_unlisted(built):
    """setuptools warns, in some 30 lines of every install's output, of a folder inside a package (the report's
    templates) that `packages` does not list."""
    assert "absent from the `packages` configuration" not in built[1]


def test_wheel_holds_every_module_and_sql_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for package, folder in PACKAGES.items():
        prefix = package.replace(".", "/")
        for source in list(folder.glob("*.py")) + list(folder.glob("*.sql")) + list(folder.glob("templates/*")):
            assert f"{prefix}/{source.relative_to(folder)}" in names, f"{source} is missing from the wheel"


def test_installed_wheel_imports_every_module(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        timeout=300,
    )
    modules = [
        f"{package}.{p.stem}" if p.stem != "__init__" else package
        for package, folder in PACKAGES.items()
        for p in folder.glob("*.py")
    ] + ["kernelscope.analyzer._kineto", "kernelscope.analyzer._held"]  # native: built wherever there is a C compiler
    code = (
        f"import sys; sys.path.insert(0, {str(target)!r}); import importlib\n"
        f"for m in {modules!r}:\n"
        f"    mod = importlib.import_module(m)\n"
        f"    assert mod.__file__.startswith({str(target)!r}), (m, mod.__file__)\n"
        "print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_without_a_c_compiler_the_wheel_builds_and_analyzes_with_duckdbs_reader(tmp_path):
    source = tmp_path / "source"  # the checkout without the native reader an editable install built in place
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns("*.so", ".*", "build", "*.egg-info", "sample_traces"))
    out = tmp_path / "wheel"
    env = {**os.environ, "CC": "false", "LDSHARED": "false"}  # every compile fails, as with no compiler
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    (path,) = out.glob("kernelscope-*.whl")
    assert not [n for n in zipfile.ZipFile(path).namelist() if "_kineto" in n or "_held" in n]
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(path)],
        check=True,
        timeout=300,
    )
    code = (
        f"import sys; sys.path.insert(0, {str(target)!r})\n"
        # the checkout's editable finder would find the native reader built in place
        "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]\n"
        "from kernelscope.analyzer import held, ingest, load_run\n"
        f"assert ingest.__file__.startswith({str(target)!r}) and ingest.native_reader is None\n"
        "assert held.native_sweep is None\n"
        f"run = load_run({str(REPO / 'sample_traces' / 'gpt2')!r})\n"
        "assert run.header.native_parts == [] and run.con.execute('SELECT count(*) FROM kernels').fetchone()[0] > 0\n"
        "print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
