"""A backward the model runs (torch.autograd.grad in its forward: guidance, test-time optimisation, saliency) runs
on autograd's device worker threads off the CPU, and the calls its hooks make there are the model's: scoped,
sampled and attributed, while a backward run by a thread the recording does not scope stays unscoped. The engine's
worker runs only in a process whose first backward saw the device, so tests/autograd_device_worker.py runs alone."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("key_kept", [False, True], ids=["key-removed", "key-kept-as-before-torch-2.12"])
def test_the_calls_of_hooks_on_autograd_s_device_threads_are_the_model_s(key_kept):
    script = Path(__file__).with_name("autograd_device_worker.py")
    argv = [sys.executable, str(script)] + (["--kept-key"] if key_kept else [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["hooks on a worker"], "the hook ran on the engine's worker thread, not on the thread of the pass"
    assert seen["scoped backward left alone"] is False, "the worker runs a scoped thread's backward as the model's"
    assert seen["server backward left alone"] is True, "a thread the recording does not scope stays unscoped"
    assert seen["backward aside left alone"] is True, "a thread stepped aside for torch's tracing is not scoped"
    assert seen["backward after the recording left alone"] is True
    assert seen["normalize calls"] == [1], "the hook's call is a sample of the pass"
    assert seen["normalize rows"] > 0, "its operators are its call's"
    # a torch that cannot take the key away gives it to the main thread alone: a thread's key left at its exit can
    # deadlock it
    assert seen["key on a started thread"] is not key_kept
    # a backward started inside the model's open scopes (an autograd Function's forward taking a gradient): its nodes
    # reopen them on the worker, so what runs there is that call's in that module; only the engine's operator around
    # the first node, which runs before any hook, stays outside
    rows = {tuple(row) for row in seen["worker rows"]}
    assert {("grad", "GradStep.apply"), ("grad", "normalize")} <= rows, rows
    assert all(module == "grad" for module, call in rows if call != "autograd::engine::evaluate_function: SumBackward0")
    # its last node on the starting thread (a CPU leaf's AccumulateGrad), the worker's scopes are closed from there
    mixed = {tuple(row) for row in seen["mixed worker rows"]}
    assert ("mixed", "normalize") in mixed and {module for module, _ in mixed} == {"mixed", "None"}, mixed
