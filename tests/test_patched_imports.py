"""No module is imported while the functions are patched: module-level code that stores torch functions (dynamo's
tables of torch functions, inductor's) would keep the wrappers for the rest of the process.

torch.profiler's first start in a process runs ``hasattr(torch, "_inductor")``, which imports inductor and dynamo
(torch 2.11–2.13); the first recording in a fresh process must not do that inside the patched window."""

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

SCRIPT = textwrap.dedent(
    """
    import builtins, sys, tempfile
    import torch
    import torch.nn.functional as F
    from torch import nn
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    original = F.linear
    imported_while_patched = []
    real_import = builtins.__import__

    def watching_import(name, globals=None, locals=None, fromlist=(), level=0):
        before = set(sys.modules)
        module = real_import(name, globals, locals, fromlist, level)
        if F.linear is not original:
            imported_while_patched.extend(sorted(set(sys.modules) - before - set(imported_while_patched)))
        return module

    builtins.__import__ = watching_import
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    out = tempfile.mkdtemp() + "/run"
    ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2, 4),), {})], warmup_iterations=3, out=out)
    assert F.linear is original
    print("torch._dynamo" in sys.modules, imported_while_patched)
    """
)


def test_the_first_recording_of_a_process_imports_nothing_while_patched():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    dynamo_loaded, imported = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert imported == "[]", f"imported while patched: {imported[:300]}"
    assert dynamo_loaded == "True", "torch.profiler's first start imports dynamo: here before the patches"
