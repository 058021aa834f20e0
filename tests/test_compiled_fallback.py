"""What a recording that fell back to module scopes leaves in dynamo's caches. Its passes compile with the recorder's
instance attributes in the modules' ``__dict__``: entries that guard them, never hit again unpatched, counted against
the recompile limit of their code. transformers decorates every model's forward with one shared wrapper taking
``*args`` (one count for all models), so a later recording of another compiled model found that code at its limit
and fell back too (benchmarks/sweep_cpu_models_unseen9.py). The recording drops what it compiled."""

import functools
import inspect
import itertools
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.compiled import compiled_entries  # noqa: E402
from torch import nn  # noqa: E402

TAG = ["t"]  # read by Tagged's compiled code: a new value on every pass compiles it anew


def shared(forward):
    @functools.wraps(forward)
    def wrapper(*args, **kwargs):  # the module in args, as transformers' decorators take it
        return forward(*args, **kwargs)

    return wrapper


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    @shared
    def forward(self, x):
        return F.relu(self.fc(x))


class Tagged(Plain):
    @shared
    def forward(self, x):
        return F.relu(self.fc(x)) * len(TAG[0])


def _profile(fn, module, warmup_iterations, tmp_path, name):
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        profiler = ModuleFunctionKernelProfiler()
        profiler.profile(fn, [((torch.randn(4, 8),), {})], module=module, warmup_iterations=warmup_iterations,
                         out=tmp_path / name)  # fmt: skip
    return profiler.run.manifest["compiled_code"]


def _entries_of(function) -> int:
    return len(compiled_entries().get(function.__code__, ()))


def test_a_recording_that_fell_back_leaves_no_entry_it_compiled_and_the_next_model_keeps_its_code(tmp_path):
    torch._dynamo.reset()
    torch.manual_seed(0)
    tagged, plain = Tagged().eval(), Plain().eval()
    tagged.forward = torch.compile(tagged.forward, backend="eager")
    plain.forward = torch.compile(plain.forward, backend="eager")
    tags = ("t" * n for n in itertools.count(1))

    def run_tagged(x):
        TAG[0] = next(tags)
        return tagged(x)

    with torch.no_grad():
        run_tagged(torch.randn(4, 8))
    for attempt in range(2):  # two warm-ups unpatched: the changing tag is guarded from then on, and is refused
        assert _profile(run_tagged, tagged, 4, tmp_path, f"tagged{attempt}") == "module_scopes_only"
        assert _entries_of(Tagged.forward) < torch._dynamo.config.recompile_limit, "what it compiled is dropped"
    assert _profile(plain, plain, 3, tmp_path, "plain") == "kept"


class Generating(Plain):
    """A method compiled by the program, not held by the module (``torch.compile(model.generate)``), that reads the
    module's ``forward`` as transformers' ``generate()`` does: its graphs guard "no instance ``forward``"."""

    seen: list

    def generate(self, x):
        takes_x = "x" in inspect.signature(self.forward).parameters
        x = torch.cat([x, self(x[-1:])]) if takes_x else x
        _look(self)  # run eagerly, between two graphs
        return torch.cat([x, self(x[-1:])])


@torch.compiler.disable
def _look(module):
    module.seen.append("forward" in vars(module))


@pytest.mark.parametrize("wrapped_inline", [False, True], ids=["method", "method-in-wrap_inline"])
def test_a_compiled_method_the_module_does_not_hold_runs_with_its_own_values_in_its_scope(tmp_path, wrapped_inline):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Generating().eval()
    model.seen = []
    # torch 2.11 compiles a method it skips (transformers' generate, under torch.no_grad()) through wrap_inline's
    # wrapper, as wrap_top_frame makes every torch do
    with torch._dynamo.config.patch(wrap_top_frame=wrapped_inline):
        generate = torch.compile(model.generate, backend="eager")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        profiler = ModuleFunctionKernelProfiler()
        frame, data = profiler.profile(lambda x: generate(x), [((torch.randn(2, 8),), {})], module=model,
                                       out=tmp_path / "run")  # fmt: skip
    assert profiler.run.manifest["compiled_code"] == "kept"
    assert model.seen and not any(model.seen), "its graphs find the module as they were compiled"
    assert set(frame["module_name"]) == {""}, "its kernels are the module's"
    assert "torch.compile" in set(frame["function_name"]) and [n for n, _ in data["torch.compile"]] == [1]
    assert "forward" not in vars(model) and "_call_impl" not in vars(model)


class Scaled(Plain):
    """An int attribute the compiled code reads: one guard set per value, all in the shared ``*args`` frame."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    @shared
    def forward(self, x):
        return F.relu(self.fc(x)) * self.n


def _doubled(x):
    return x * 2


def test_a_frame_at_its_recompile_limit_runs_eagerly_while_recorded_and_the_rest_is_kept(tmp_path):
    torch._dynamo.reset()
    torch.manual_seed(0)
    limit = torch._dynamo.config.recompile_limit
    models = [Scaled(n).eval() for n in range(limit + 2)]
    for model in models:
        model.forward = torch.compile(model.forward, backend="eager")
    doubled = torch.compile(_doubled, backend="eager")
    x = torch.randn(4, 8)
    with torch.no_grad():
        expected = [doubled(model(x)) for model in models]  # the last two find the shared frame at its limit
    shared_code = Scaled.forward.__code__
    before = {code: [id(entry.code) for entry in entries] for code, entries in compiled_entries().items()}
    assert len(before[shared_code]) == limit
    last = models[-1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profiler = ModuleFunctionKernelProfiler()
        frame, _ = profiler.profile(lambda x: doubled(last(x)), [((x,), {})], module=last, out=tmp_path / "run")
    said = [str(w.message) for w in caught if "recompile limit" in str(w.message)]
    assert profiler.run.manifest["compiled_code"] == "kept", [str(w.message) for w in caught]
    assert len(said) == 1 and "ran eagerly while recorded" in said[0] and f"wrapper ({__file__}" in said[0]
    after = {code: [id(entry.code) for entry in entries] for code, entries in compiled_entries().items()}
    assert after.keys() == before.keys() and all(sorted(after[c]) == sorted(before[c]) for c in before), "none compiled"
    assert len(frame) > 0 and "torch.compile" in set(frame["function_name"])
    with torch.no_grad():
        again = [doubled(model(x)) for model in models]  # unrecorded as before: no refusal, the same results
    assert all(torch.equal(a, b) for a, b in zip(again, expected, strict=True))
