"""A torch.compile'd method a module holds beside its forward (transformers' ``_compiled_call``, or a decoding step),
run by the program while recorded (recorder/compiled_calls.py).

Its graphs guard the ``__dict__`` of the module and of the modules under it (no instance ``forward`` or
``_call_impl``), where the recorder's scoped attributes sit: while it runs they hold the model's own values again.
Under the recorder's stance only the guards that tell entries apart run, so what shows it there is code the compiled
method runs eagerly between its graphs; in a recording with module scopes only every guard runs, and a miss
recompiles (entries the recording then drops). Its rows are the call ``torch.compile`` in the module's own scope.
"""

import types
import warnings

import pytest
from conftest import assert_patches_undone, snapshot_patch_targets

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.compiled import compiled_entries  # noqa: E402
from torch import nn  # noqa: E402

BACKENDS = ["eager", "aot_eager"]
REGION = ("Torch-Compiled Region", "TorchDynamo Cache Lookup")  # a compiled call's own rows: its guards and graphs


@torch.compiler.disable
def _look(module: nn.Module, step: int) -> None:
    """Run eagerly between two graphs: notes whether any attribute the recorder sets on the decoder is there."""
    patched = {"forward", "_call_impl"} & (vars(module).keys() | vars(module.fc1).keys())
    module.seen.append((step, bool(patched)))


def _twice(t):
    return t * 2


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 16)
        self.seen: list = []

    def forward(self, x, step: int):
        _look(self, step)
        return self.fc2(F.gelu(self.fc1(x))) + step


class Generator(nn.Module):
    """Its first step calls the decoder as it is, the others through ``torch.compile(decoder.__call__)``, which the
    decoder holds. ``fresh``: a function of new code compiled on every pass too, which only a recording with module
    scopes only can run (recorder/compiled.py, ``record_keeping_compiled_code``)."""

    def __init__(self, backend: str, fresh: bool):
        super().__init__()
        self.backend, self.fresh = backend, fresh
        self.decoder = Decoder()
        self.decoder._compiled_call = torch.compile(self.decoder.__call__, backend=backend)

    def forward(self, x):
        h = self.decoder(x, 0)
        for step in range(1, 4):
            h = self.decoder._compiled_call(h, step)
        if self.fresh:
            h = torch.compile(types.FunctionType(_twice.__code__.replace(), globals()), backend=self.backend)(h)
        return h


def _entries() -> dict:
    return {code: {id(entry.code) for entry in found} for code, found in compiled_entries().items()}


def _profile(model, samples, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profiler = ModuleFunctionKernelProfiler()
        frame, _ = profiler.profile(model, samples, out=tmp_path / "run")
    ours = [str(w.message) for w in caught if str(w.message).startswith("kernelscope")]
    return profiler.run.manifest["compiled_code"], frame, ours


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fresh", [False, True], ids=["kept", "module-scopes-only"])
def test_a_compiled_call_the_module_holds_runs_with_the_modules_own_values(backend, fresh, tmp_path):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Generator(backend, fresh).eval()
    samples = [((torch.randn(4, 16),), {})]
    with torch.no_grad():
        expected = [model(*samples[0][0]) for _ in range(2)][-1]  # compiled as the user runs it
    before, patch_targets = _entries(), snapshot_patch_targets(model)
    model.decoder.seen.clear()
    how, frame, warned = _profile(model, samples, tmp_path)
    assert how == ("module_scopes_only" if fresh else "kept")
    assert len(warned) == fresh and all("only modules and compiled modules were scoped" in w for w in warned)
    compiled_steps = {patched for step, patched in model.decoder.seen if step > 0}
    assert compiled_steps == {False}, "while the compiled call runs, the decoder's modules hold their own values"
    assert {patched for step, patched in model.decoder.seen if step == 0} >= {True}, "the eager step is scoped"
    after = _entries()
    ours = [code for code in before if code.co_name != "_twice"]  # _twice's copies: new code every pass
    assert ours and all(after.get(code) == before[code] for code in ours), "every guard held: no entry compiled anew"
    assert len(frame) > 0 and {"decoder.fc1", "decoder.fc2"} <= set(frame["module_name"])
    assert_patches_undone(model, patch_targets)
    with torch.no_grad():
        assert torch.equal(model(*samples[0][0]), expected)


class Stepper(nn.Module):
    """Holds a compiled method that is not its call: the step's own work (``* 2 + i``) is no module's under it."""

    def __init__(self, backend: str):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self._compiled_step = torch.compile(self.step, backend=backend)

    def forward(self, x):
        return F.relu(self.fc(x))

    def step(self, h, i: int):
        return self(h) * 2 + i


class Host(nn.Module):
    def __init__(self, backend: str):
        super().__init__()
        self.stepper = Stepper(backend)

    def forward(self, x):
        h = self.stepper(x)
        for i in range(1, 3):
            h = self.stepper._compiled_step(h, i)
        return h


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compiled_method_the_module_holds_is_the_call_torch_compile_in_the_modules_scope(backend, tmp_path):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Host(backend).eval()
    samples = [((torch.randn(4, 8),), {})]
    with torch.no_grad():
        model(*samples[0][0]), model(*samples[0][0])
    before = _entries()
    how, frame, warned = _profile(model, samples, tmp_path)
    assert how == "kept" and warned == []
    assert _entries() == before
    region = frame[frame["call_op"].fillna("").str.startswith(REGION)]
    assert len(region) > 0 and set(region["module_name"]) == {"stepper"}, "the step's own rows are its module's"
    assert set(region["function_name"]) == {"torch.compile"} and set(region["sample_id"]) == {0, 1}, "two steps"
    assert set(frame["module_name"]) == {"stepper", "stepper.fc"}


class Outer(nn.Module):
    """Its compiled call calls the compiled method of a module under it: its graphs guard that method's attribute."""

    def __init__(self, backend: str):
        super().__init__()
        self.fc, self.inner = nn.Linear(8, 8), Stepper(backend)
        self._compiled_call = torch.compile(self.__call__, backend=backend)

    def forward(self, x):
        return self.inner._compiled_step(self.fc(x), 1)


class Nested(nn.Module):
    def __init__(self, backend: str):
        super().__init__()
        self.outer = Outer(backend)

    def forward(self, x):
        return self.outer._compiled_call(self.outer(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compiled_call_that_calls_a_compiled_method_under_it_finds_that_method_as_compiled(backend, tmp_path):
    """The recorder's scoped attribute of the inner method is put back too while the outer call runs: with only the
    patches made before the compiled methods', the outer call's code was refused and the recording fell back."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Nested(backend).eval()
    samples = [((torch.randn(4, 8),), {})]
    with torch.no_grad():
        expected = [model(*samples[0][0]) for _ in range(2)][-1]
    before, patch_targets = _entries(), snapshot_patch_targets(model)
    how, frame, warned = _profile(model, samples, tmp_path)
    assert how == "kept" and warned == []
    assert _entries() == before
    compiled = frame[frame["function_name"] == "torch.compile"]
    assert set(compiled["module_name"]) == {"outer", "outer.inner"}
    assert_patches_undone(model, patch_targets)
    with torch.no_grad():
        assert torch.equal(model(*samples[0][0]), expected)
