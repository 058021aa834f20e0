"""A C extension of the analyzer built with -fsanitize=address,undefined, and the environment to run a script against
it in a subprocess (libasan preloaded, Python's allocator off so every buffer is malloc's), for the tests that run
the native code's fuzzers under the sanitizers (test_native_reader.py, test_held.py)."""

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
from conftest import REPO


def sanitized_build(name: str, folder: Path, *flags: str) -> tuple[Path, dict[str, str]]:
    """analyzer/<name>.c built into ``folder`` with the sanitizers (and gcc's ``flags``), and the environment to load
    it in; skipped where gcc or libasan is missing, failed there in CI (which must run it)."""

    def unavailable(why: str) -> None:
        if os.environ.get("CI"):
            pytest.fail(f"the sanitizer build needs {why}")
        pytest.skip(f"no {why}")

    compiler = shutil.which("gcc")
    if compiler is None:
        unavailable("gcc")
    libraries = [
        subprocess.run([compiler, f"-print-file-name={library}"], capture_output=True, text=True).stdout.strip()
        for library in ("libasan.so", "libstdc++.so.6")  # libstdc++ first-hand, or ASan cannot catch DuckDB's throws
    ]
    if not all(os.path.isabs(library) for library in libraries):
        unavailable("libasan")
    module = folder / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    build = [compiler, "-shared", "-fPIC", "-g", "-O1", "-fno-omit-frame-pointer", "-fsanitize=address,undefined"]
    build += ["-fno-sanitize-recover=all", f"-I{sysconfig.get_paths()['include']}", *flags]
    subprocess.run([*build, str(REPO / "analyzer" / f"{name}.c"), "-o", str(module)], check=True)
    env = dict(
        os.environ,
        LD_PRELOAD=":".join(libraries),
        ASAN_OPTIONS="detect_leaks=0",
        UBSAN_OPTIONS="print_stacktrace=1",
        PYTHONMALLOC="malloc",
    )
    return module, env
