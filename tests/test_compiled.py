"""torch.compile'd code inside a recording runs what it compiled without the recorder, however the model was compiled.

Compiled code guards the identity of the functions it traced (``F.linear``): patched, they would fail the guards and
dynamo would compile the model again inside the recorded pass, through the wrappers. The recorder runs the entries
compiled before the patches (recorder/compiled.py); these tests check, for every way users compile, that profile()
records every kernel, compiles nothing, and leaves the user's compiled entries the very objects they were. The
backend is ``eager`` (dynamo's guards and graphs, no C++ compile) except for one inductor model; the GPU check
records the same with inductor, CUDA graphs and autotuning (benchmarks/workloads.py).
"""

import gc
import os
import subprocess
import sys
import types
import warnings

import pytest
from conftest import snapshot_patch_targets

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.compiled import compiled_entries  # noqa: E402
from torch import nn  # noqa: E402

SHAPES = ((4, 16), (7, 16))  # two samples of two shapes: two compiled entries per frame (one with dynamic=True)
ONE_SHAPE = {"forward attribute", "module.compile()", "function"}  # one compile each is enough to show their form
CACHE_LOOKUP = "TorchDynamo Cache Lookup"  # a CPU operator of dynamo's own, outside any scope: no kernel on a GPU
# The eager backend runs its graphs' code, whose functionals have scopes of their own, as run eagerly (graph_code.py)
NET_CALLS = {"torch.compile", "linear"}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 16)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Branchy(nn.Module):
    """Graph breaks at patched calls: compiled code calls ``Tensor.__bool__`` and ``Tensor.item`` eagerly; the
    resume function after the branch breaks at once, so its compiled entry guards no tensor."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc1(x)
        if h.sum() > 1e6:  # data-dependent, never true here
            h = F.gelu(h)
        torch._dynamo.graph_break()
        return self.fc2(h) * h.mean().item()


class Host(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.head = nn.Linear(16, 16)

    def forward(self, x):
        return self.head(self.block(x))


def _scaled_gelu(x, w):
    return F.gelu(F.linear(x, w)) * 2


def _ramp(n):
    return torch.arange(n) * 0.5


class CallsACompiledFunction(nn.Module):
    """Two compiled functions: one of tensors, one of an int, whose compiled entry guards no tensor."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 16))
        self.head = nn.Linear(16, 16)
        self.compiled = torch.compile(_scaled_gelu, backend="eager")
        self.ramp = torch.compile(_ramp, backend="eager")

    def forward(self, x):
        return self.head(self.compiled(x, self.w) + self.ramp(x.shape[-1]))


def _forward_compiled(model):
    model.forward = torch.compile(model.forward, backend="eager")
    return model


def _compiled_in_place(model):
    model.compile(backend="eager")
    return model


FORMS = {  # how users compile -> (the model, the module whose rows are torch.compile's; None: a compiled function)
    "root": lambda: (torch.compile(Net(), backend="eager"), ""),
    "child": lambda: (Host(torch.compile(Net(), backend="eager")), "block"),
    "forward attribute": lambda: (_forward_compiled(Net()), ""),
    "module.compile()": lambda: (_compiled_in_place(Net()), ""),
    "function": lambda: (CallsACompiledFunction(), None),
    "dynamic": lambda: (torch.compile(Net(), backend="eager", dynamic=True), ""),
    "graph breaks": lambda: (torch.compile(Branchy(), backend="eager"), ""),
}


def entries(collect_first: bool = False) -> dict:
    """Every frame dynamo compiled, with the code of each of its compiled entries. ``collect_first``: collect the
    models of earlier tests first, since dynamo invalidates the entries that guard a dead object."""
    if collect_first:
        gc.collect()
    return {code: [entry.code for entry in found] for code, found in compiled_entries().items()}


def assert_same_entries(before: dict, after: dict) -> None:
    """The same frames with the same compiled entries, the very objects (in any order: a hit moves to the front)."""
    assert after.keys() == before.keys(), "no frame compiled, none dropped"
    for code, entries in before.items():
        assert len(after[code]) == len(entries), f"{code.co_name} gained or lost compiled entries"
        assert {id(entry) for entry in after[code]} == {id(entry) for entry in entries}, code.co_name


def _samples():
    torch.manual_seed(0)
    return [((torch.randn(*shape),), {}) for shape in SHAPES]


def _run(model, samples):
    with torch.no_grad():
        return [model(*args, **kwargs) for args, kwargs in samples]


@pytest.fixture(scope="module")
def compiled_models():
    """Each form's model, compiled by running it as a user does (under no_grad, both shapes), shared by the tests."""
    torch._dynamo.reset()
    models = {}
    for form, make in FORMS.items():
        torch.manual_seed(0)
        model, compiled_module = make()
        model.eval()
        samples = _samples()[: 1 if form in ONE_SHAPE else 2]
        models[form] = model, compiled_module, samples, _run(model, samples)
    yield models
    torch._dynamo.reset()


def _profile(model, samples, tmp_path, calls="all", **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profiler = ModuleFunctionKernelProfiler(calls=calls)
        frame, data = profiler.profile(model, samples, out=tmp_path / f"run{len(list(tmp_path.iterdir()))}", **options)
    ours = [str(w.message) for w in caught if str(w.message).startswith("kernelscope")]
    return profiler, frame, data, ours


def assert_patches_undone(model, before) -> None:
    """Every torch.nn.functional attribute and every module attribute the identical object it was (an instance
    ``forward`` of the user's own, as ``torch.compile`` sets, included)."""
    functional, modules = snapshot_patch_targets(model)
    assert functional.keys() == before[0].keys() and all(functional[k] is v for k, v in before[0].items())
    assert modules.keys() == before[1].keys()
    for name, attributes in before[1].items():
        assert modules[name].keys() == attributes.keys(), f"module {name!r} gained or lost attributes"
        assert all(modules[name][k] is v for k, v in attributes.items()), f"module {name!r} changed"


def assert_every_kernel_named(frame) -> None:
    unnamed = frame[frame["function_name"].isna()]
    assert len(frame) > 0 and set(unnamed["call_op"]) <= {CACHE_LOOKUP}, unnamed[["module_name", "call_op"]]


# Each form once, with warm-ups of 3 (two of them unpatched) or 1 (patched only: the user's own calls compiled it).
@pytest.mark.parametrize(("form", "warmup_iterations"), [(f, 3 if i % 2 == 0 else 1) for i, f in enumerate(FORMS)])
def test_compiled_code_runs_unchanged_while_recorded(compiled_models, form, warmup_iterations, tmp_path):
    model, compiled_module, samples, expected = compiled_models[form]
    before, patch_targets = entries(collect_first=True), snapshot_patch_targets(model)
    profiler, frame, _, warned = _profile(model, samples, tmp_path, warmup_iterations=warmup_iterations)
    assert warned == [] and profiler.run.manifest["compiled_code"] == "kept"
    assert_same_entries(before, entries())
    assert_every_kernel_named(frame)
    if compiled_module is None:
        region = frame[frame["call_op"].fillna("").str.startswith("Torch-Compiled Region")]
        assert len(region) > 0 and set(region["function_name"]) <= {"torch.compile", "Tensor.__mul__"}
        assert "torch.compile" in set(region["function_name"])  # (eager backend: its graph runs Tensor.__mul__)
    else:
        ours = frame[frame["module_name"] == compiled_module]
        own = ours[ours["function_name"] == "torch.compile"]
        assert set(ours["function_name"]) == NET_CALLS and set(own["sample_id"]) == set(range(len(samples)))
        assert set(frame["module_name"]) <= {compiled_module, "", "head"}, "nothing inside it is scoped"
    assert all(torch.equal(a, b) for a, b in zip(_run(model, samples), expected, strict=True))
    assert_same_entries(before, entries())
    assert_patches_undone(model, patch_targets)


def test_the_same_compiled_model_profiled_twice_and_without_warm_up(compiled_models, tmp_path):
    model, _, samples, expected = compiled_models["root"]
    before = entries(collect_first=True)
    for warmup_iterations in (3, 0):
        profiler, frame, _, warned = _profile(model, samples, tmp_path, warmup_iterations=warmup_iterations)
        assert warned == [] and profiler.run.manifest["compiled_code"] == "kept"
        assert set(frame["function_name"]) == NET_CALLS
    assert_same_entries(before, entries())
    assert all(torch.equal(a, b) for a, b in zip(_run(model, samples), expected, strict=True))


def _net_of_new_code() -> nn.Module:
    """A Net whose forward is new code, which dynamo has compiled nothing of (a new Net would run Net's entries)."""
    forward = types.FunctionType(Net.forward.__code__.replace(), Net.forward.__globals__)
    return type("NewNet", (Net,), {"forward": forward})()


@pytest.mark.parametrize("warmup_iterations", [0, 1, 3])
def test_a_model_compiled_for_the_first_time_in_profile_is_compiled_unpatched(warmup_iterations, tmp_path):
    """With 0 or 1 warm-ups nothing runs unpatched before the patches: torch refuses the frames that have no entry;
    profile() then runs one pass unpatched, so dynamo compiles the model as the user runs it."""
    model = torch.compile(_net_of_new_code().eval(), backend="eager")
    samples = _samples()
    profiler, frame, _, warned = _profile(model, samples, tmp_path, warmup_iterations=warmup_iterations)
    fresh = warmup_iterations < 3
    assert profiler.run.manifest["compiled_code"] == ("compiled_unpatched" if fresh else "kept")
    assert len(warned) == fresh and all("one more pass" in w for w in warned)
    own = frame[frame["function_name"] == "torch.compile"]
    assert set(frame["function_name"]) == NET_CALLS and set(own["sample_id"]) == {0, 1}
    before = entries(collect_first=True)
    _run(model, samples)
    assert_same_entries(before, entries())  # compiled as the user runs it: no recompile afterwards


class NewCodeEveryPass(nn.Module):
    """Compiles a function with new code on every pass, which dynamo must compile while the recorder runs."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        step = types.FunctionType(_scaled_gelu.__code__.replace(), globals())
        return torch.compile(step, backend="eager")(self.fc(x), self.fc.weight)


def test_compiled_code_that_cannot_be_kept_is_recorded_with_module_scopes_only(tmp_path):
    model = NewCodeEveryPass().eval()
    samples = _samples()[:1]
    before = snapshot_patch_targets(model)
    profiler, frame, data, warned = _profile(model, samples, tmp_path, warmup_iterations=1)
    assert len(warned) == 1 and "only modules and compiled modules were scoped" in warned[0]
    assert profiler.run.manifest["compiled_code"] == "module_scopes_only"
    assert set(frame["module_name"]) == {"", "fc"} and data == {}
    scoped = {name for name in frame["function_name"].dropna() if "::" not in name and name != "(other operator)"}
    assert scoped <= {"torch.compile"}, "no function was patched: the others are named after their operators"
    assert_patches_undone(model, before)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 16)

    def forward(self, x, step: int):
        return self.fc2(F.gelu(self.fc1(x))) + step


class Generator(nn.Module):
    """Runs its decoder both ways, as transformers' generate() does with a static cache: as it is for the first
    step, then through the ``torch.compile(decoder.__call__)`` the decoder holds (``_compiled_call``)."""

    def __init__(self):
        super().__init__()
        self.decoder = Decoder()
        self.decoder._compiled_call = torch.compile(self.decoder.__call__, backend="eager")

    def forward(self, x):
        h = self.decoder(x, 0)
        for step in range(1, 4):
            h = self.decoder._compiled_call(h, step)
        return h


def test_a_compiled_call_a_module_holds_beside_its_forward_runs_its_entries_and_its_modules_are_scoped(tmp_path):
    """Its graphs guard the decoder's modules' ``__dict__``, where their patched forwards sit: while the compiled
    call runs they hold the modules' own again, so its entries are kept, and its eager step has every scope."""
    torch.manual_seed(0)
    model = Generator().eval()
    samples = _samples()[:1]
    expected = _run(model, samples) + _run(model, samples)  # compiled as the user runs it
    compiled_call, patch_targets = vars(model.decoder)["_compiled_call"], snapshot_patch_targets(model)
    before = entries(collect_first=True)
    profiler, frame, _, warned = _profile(model, samples, tmp_path)
    assert warned == [] and profiler.run.manifest["compiled_code"] == "kept"
    assert_same_entries(before, entries())
    assert_every_kernel_named(frame)
    named = frame.groupby("module_name")["function_name"].agg(set).to_dict()
    assert named["decoder.fc1"] == named["decoder.fc2"] == {"linear"}, "the eager step's modules are scoped"
    assert {"torch.compile", "gelu"} <= named["decoder"]
    region = frame[frame["call_op"].fillna("").str.startswith("Torch-Compiled Region")]
    assert len(region) > 0 and set(region["module_name"]) == {"decoder"}
    assert set(frame.loc[frame["function_name"] == "torch.compile", "sample_id"]) == {0, 1, 2}, "three steps"
    assert vars(model.decoder)["_compiled_call"] is compiled_call
    assert_patches_undone(model, patch_targets)
    assert all(torch.equal(a, b) for a, b in zip(_run(model, samples), expected, strict=False))
    assert_same_entries(before, entries())


@pytest.mark.parametrize(("stance", "calls"), [("force_eager", "functional"), ("fail_on_recompile", "all")])
def test_the_users_own_stance_is_kept(compiled_models, stance, calls, tmp_path):
    model, _, samples, _ = compiled_models["child"]
    before = entries(collect_first=True)
    with torch.compiler.set_stance(stance):
        profiler, frame, _, warned = _profile(model, samples, tmp_path, calls=calls)
        assert torch._dynamo.eval_frame._stance.stance == stance
        assert torch._dynamo.eval_frame._stance.skip_guard_eval_unsafe is False
    assert warned == [] and len(frame) > 0
    block = set(frame.loc[frame["module_name"] == "block", "function_name"])
    assert block == NET_CALLS, "run eagerly or by the eager backend's graph, its functionals are scoped inside"
    assert stance == "force_eager" or profiler.run.manifest["compiled_code"] == "kept"
    assert_same_entries(before, entries())


@pytest.mark.parametrize("calls", ["all", "functional"])
def test_a_compiled_function_is_named_from_its_region(compiled_models, calls, tmp_path):
    """A torch.compile'd function has no scope of its own: its region's rows get the call torch.compile from the
    trace ("Torch-Compiled Region" around them) with calls="all"; with calls="functional" they stay unnamed."""
    from kernelscope.analyzer import load_run
    from reference import assert_matches_reference

    model, _, samples, _ = compiled_models["function"]
    frame, _ = ModuleFunctionKernelProfiler(calls=calls).profile(model, samples, out=tmp_path / "run")
    # dynamo's guard check just before the region is the same call's work (attribution.sql's compiled-region rule)
    region = frame[frame["call_op"].fillna("").str.startswith(("Torch-Compiled Region", "TorchDynamo Cache Lookup"))]
    region = region[region["op"] != "aten::mul"]  # the eager backend's graph runs Tensor.__mul__, scoped
    assert len(region) > 0 and set(region["module_name"]) == {""}
    assert set(region["function_name"]) == ({"torch.compile"} if calls == "all" else {None})
    assert region["sample_id"].isna().all()
    assert set(frame.loc[frame["module_name"] == "head", "function_name"]) == {"linear"}
    with load_run(tmp_path / "run") as run:
        assert_matches_reference(run, tmp_path / "run" / "trace.json.gz")
        summary = run.describe().set_index("function_name")
    if calls == "all":
        assert summary.loc["torch.compile", "time_spent_us"] == pytest.approx(region["kernel_us"].sum())


class BrokenBlock(nn.Module):
    """Two inductor graphs, split by a graph break: the second's frame is dynamo's resume function."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc1(x)
        torch._dynamo.graph_break()
        return self.fc2(torch.relu(h))


class Holder(nn.Module):
    """Its graph breaks inside its block: its own resume function, a frame whose self is this module, runs its head."""

    def __init__(self, block):
        super().__init__()
        self.block, self.head = block, nn.Linear(16, 16)

    def forward(self, x):
        h = self.block(x)  # (self.head read before the block's call would be on the stack, not self: not known)
        return self.head(torch.tanh(h))


class CallsAnInductorFunction(nn.Module):
    """A torch.compile'd function (inductor) called in a module: its graph's nodes ran in no module of its own."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 16))
        self.head = nn.Linear(16, 16)
        self.compiled = torch.compile(_scaled_gelu)

    def forward(self, x):
        return self.head(self.compiled(x, self.w))


def test_an_inductor_compiled_model_runs_its_compiled_code_while_recorded(tmp_path):
    """inductor's code runs unchanged, and its kernels are named like eager ones where its record of their source
    nodes says so (recorder/inductor_kernels.py): its extern kernels (``aten::addmm``) are the call ``linear`` in the
    Linear they came from; its C++ kernels, of which it records nothing, are rows of their own, ``torch.compile``'s."""
    # In a process of its own: after some other test files in one pytest worker, inductor's own first C++ compile
    # (before any recording here) failed with its precompiled header rejected ('at::vec' not declared); alone it holds.
    # test_record_command.py left its tmp folder, holding a types.py, on sys.path, which inductor's subprocesses get
    # as PYTHONPATH: its vector ISA probe failed there. Reproduced after that file alone, and gone with sys.path put
    # back; the process of its own stays until the full suite has run without it.
    if os.environ.get("KS_INDUCTOR_TEST_CHILD") != "1":
        test = f"{__file__}::test_an_inductor_compiled_model_runs_its_compiled_code_while_recorded"
        child = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-W", "ignore", "-p", "no:xdist", test],
            env={**os.environ, "KS_INDUCTOR_TEST_CHILD": "1"},
            capture_output=True,
            text=True,
        )
        assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
        return
    from kernelscope.analyzer import load_run
    from reference import assert_matches_reference

    torch._dynamo.reset()
    samples = _samples()[:1]
    root = torch.compile(Net().eval())  # inductor: C++ compiled on the CPU (one shape: one compile, seconds)
    # a compiled submodule whose block breaks its graph: the block's forward is a compiled frame of its own, whose
    # graphs' paths are under the block
    host = Host(torch.compile(Holder(BrokenBlock()))).eval()
    caller = CallsAnInductorFunction().eval()  # its function's linear (an extern mm) is the caller's
    linears = {id(root): {"_orig_mod.fc1", "_orig_mod.fc2"}}
    linears[id(host)] = {"block._orig_mod.block.fc1", "block._orig_mod.block.fc2", "block._orig_mod.head"}
    linears[id(caller)] = {""}
    for model in (root, host, caller):
        expected = _run(model, samples)
        before = entries(collect_first=True)
        for warmup_iterations in (1, 3):
            profiler, frame, _, warned = _profile(model, samples, tmp_path, warmup_iterations=warmup_iterations)
            assert warned == [] and profiler.run.manifest["compiled_code"] == "kept"
            assert set(frame["function_name"]) == {"torch.compile", "linear"}, frame
            compiled = frame[frame["function_name"] == "torch.compile"]
            assert model is caller or set(compiled["sample_id"]) == {0}  # a compiled function's region has none
            extern = frame[frame["op"].isin(["aten::addmm", "aten::mm"]) & (frame["module_name"] != "head")]
            assert set(extern["function_name"]) == {"linear"}, "inductor's extern kernels are the calls they came from"
            assert set(extern["module_name"]) == linears[id(model)]
            cpp = compiled[compiled["op"].str.startswith("cpp_fused")]
            assert len(cpp) > 0 and (cpp["kernel_us"] > 0).all(), "its C++ kernels are rows of their own"
            with load_run(profiler.run.path) as run:
                assert_matches_reference(run, profiler.run.path / "trace.json.gz")
        assert_same_entries(before, entries())
        assert all(torch.equal(a, b) for a, b in zip(_run(model, samples), expected, strict=True))
    torch._dynamo.reset()
