"""The recorder on the CPU: patches and their exact removal (when the model fails: test_faults.py), samples, NaN
rules, the run it writes."""

import gc
import math
import subprocess
import weakref

import pandas as pd
import pytest
from conftest import assert_patches_undone, snapshot_patch_targets

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.analyzer import RunExistsError, TensorMeta, load_run  # noqa: E402
from kernelscope.demo import demo_workload  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.sample_keys import signature_key  # noqa: E402
from torch import nn  # noqa: E402


class Boom(Exception):
    pass


class Raising(nn.Module):
    def __init__(self, error, after_calls):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.error, self.after_calls, self.calls = error, after_calls, [0]  # a list: same object throughout

    def forward(self, x):
        self.calls[0] += 1
        if self.calls[0] > self.after_calls:
            raise self.error
        return F.relu(self.linear(x))


def test_patches_exist_only_in_the_last_warmup_and_the_recorded_pass_and_are_removed_exactly(demo_run):
    _profiler, model, _samples, *_ = demo_run
    fresh, samples = demo_workload()
    before = snapshot_patch_targets(fresh)
    seen_inside = []
    fresh.register_forward_pre_hook(lambda m, a: seen_inside.append(F.linear is before[0]["linear"]))
    _, data = ModuleFunctionKernelProfiler().profile(fresh, samples, warmup_iterations=2)
    assert seen_inside == [True, True, False, False, False, False], "patched in the last warm-up and the recording"
    _, cold_data = ModuleFunctionKernelProfiler().profile(fresh, samples, warmup_iterations=0)
    counts = {name: [calls for calls, _ in entries] for name, entries in data.items()}
    assert counts == {name: [calls for calls, _ in entries] for name, entries in cold_data.items()}, (
        "the patched warm-up pass is not counted"
    )
    assert_patches_undone(fresh, before)
    assert_patches_undone(model, snapshot_patch_targets(model))


def test_an_instance_forward_is_put_back_as_the_same_object():
    model = nn.Sequential(nn.Linear(4, 4))
    own = model[0].forward
    model[0].forward = own  # an instance attribute, as some libraries set
    ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2, 4),), {})], warmup_iterations=0)
    assert vars(model[0])["forward"] is own


def _tiny(function_names):
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
    samples = [((torch.randn(3, 8),), {}), ((torch.randn(5, 8),), {})]
    profiler = ModuleFunctionKernelProfiler(function_names)
    frame, data = profiler.profile(model, samples, warmup_iterations=1)
    return profiler, frame, data


def test_function_names_none_collects_every_function():
    profiler, frame, data = _tiny(None)
    assert set(data) == {"linear", "relu"}
    assert [calls for calls, _ in data["linear"]] == [2, 2], "both layers share each input shape"
    summary = profiler.describe_results(frame, data)
    assert not summary[["calls", "num_distinct_samples", "tensor_size_MB"]].isna().any().any()


def test_function_names_set_collects_only_those_and_never_filters_rows():
    profiler, frame, data = _tiny({"relu"})
    _, frame_all, _ = _tiny(None)
    assert set(data) == {"relu"}
    assert set(frame["function_name"]) == set(frame_all["function_name"]) == {"linear", "relu"}
    summary = profiler.describe_results(frame, data).set_index("function_name")
    assert math.isnan(summary.loc["linear", "calls"]) and math.isnan(summary.loc["linear", "tensor_size_MB"])
    assert math.isnan(summary.loc["linear", "num_distinct_samples"])
    assert summary.loc["relu", "calls"] == 2 and summary.loc["relu", "num_distinct_samples"] == 2
    assert frame.loc[frame["function_name"] == "linear", "sample_id"].isna().all()


def test_function_names_empty_collects_nothing():
    profiler, frame, data = _tiny(set())
    assert data == {}
    summary = profiler.describe_results(frame, data)
    assert summary["calls"].isna().all() and (summary["num_modules"] >= 1).all()
    assert summary["time_spent_pct"].sum() == pytest.approx(100.0)


def test_describe_results_rules(demo_run):
    profiler, _model, _samples, frame, data, _out = demo_run
    full = profiler.describe_results(frame, data, top_k=1000)
    assert full["time_spent_pct"].sum() == pytest.approx(100.0)
    assert (full["calls"] >= full["num_distinct_samples"]).all()
    assert list(full["time_spent_us"]) == sorted(full["time_spent_us"], reverse=True)
    by_function = frame.groupby("function_name")["kernel_us"].sum()
    assert full.set_index("function_name")["time_spent_us"].to_dict() == pytest.approx(by_function.to_dict())
    top = profiler.describe_results(frame, data, top_k=3)
    assert len(top) == 3 and top["time_spent_pct"].tolist() == pytest.approx(full["time_spent_pct"][:3].tolist())
    sizes = {
        name: sum(
            s.numel() * s.element_size() for _, (args, _kw) in entries for s in args if isinstance(s, torch.Tensor)
        )
        for name, entries in data.items()
    }
    assert full.set_index("function_name")["tensor_size_MB"]["conv2d"] == pytest.approx(sizes["conv2d"] / 2**20)


def test_nested_functionals_own_their_kernels(demo_run):
    _profiler, _model, _samples, frame, data, _out = demo_run
    attention = frame[frame["module_name"] == "encoder.self_attn"]
    assert set(attention["function_name"]) == {"multi_head_attention_forward", "linear", "scaled_dot_product_attention"}
    assert (attention.loc[attention["call_op"] == "aten::linear", "function_name"] == "linear").all()
    sdpa = attention[attention["function_name"] == "scaled_dot_product_attention"]
    assert (sdpa["call_op"] == "aten::scaled_dot_product_attention").all()
    assert "linear" in data and "multi_head_attention_forward" in data


def test_sample_key_tells_dtype_strides_device_and_values_apart():
    x = torch.randn(4, 6)
    assert signature_key(x) == signature_key(torch.randn(4, 6))
    assert signature_key(x) != signature_key(x.to(torch.float16))
    assert signature_key(x) != signature_key(torch.randn(6, 4).t())
    assert signature_key(x) != signature_key(torch.randn(4, 7)[:, :6])
    assert signature_key(([x], {"k": 1})) != signature_key(([x], {"k": 2}))
    assert signature_key((1,)) != signature_key((1.0,)) != signature_key((True,))
    assert signature_key((float("nan"),)) == signature_key((float("nan"),))


def test_fp16_and_fp32_calls_are_distinct_samples():
    class Mixed(nn.Module):
        def forward(self, x):
            return F.relu(x) + F.relu(x.to(torch.bfloat16)).float() + F.relu(x.t().contiguous().t())

    _frame, data = ModuleFunctionKernelProfiler().profile(Mixed(), [((torch.randn(4, 6),), {})], warmup_iterations=0)
    dtypes = [(args[0].dtype, args[0].is_contiguous()) for _calls, (args, _kw) in data["relu"]]
    assert dtypes == [(torch.float32, True), (torch.bfloat16, True), (torch.float32, False)]


def test_outputs_are_bit_identical_with_and_without_recording():
    model, samples = demo_workload()
    expected = [model(*args, **kwargs) for args, kwargs in samples]
    outputs = []
    ModuleFunctionKernelProfiler().profile(
        lambda: outputs.extend(model(*a, **k) for a, k in samples), module=model, warmup_iterations=0
    )
    assert len(outputs) == len(expected)
    assert all(torch.equal(a, b) for a, b in zip(outputs, expected, strict=True))


def test_in_process_result_is_what_the_analyzer_reads_back(demo_run):
    _profiler, model, _samples, frame, data, out = demo_run
    with load_run(out) as run:
        offline = run.profiling_df()
        offline_data = run.function_data()
    pd.testing.assert_frame_equal(frame.drop(columns=["module"]), offline)
    assert all(
        frame["module"].iloc[i] is dict(model.named_modules())[name]
        for i, name in enumerate(frame["module_name"])
        if name is not None
    )
    assert offline_data.keys() == data.keys()
    for name, entries in data.items():
        pairs = zip(entries, offline_data[name], strict=True)
        for (calls, live), (off_calls, meta) in pairs:
            assert calls == off_calls
            _assert_matches(live, meta)


def _assert_matches(live, meta):
    """A live argument against its offline metadata, recursively."""
    if isinstance(live, torch.Tensor):
        assert isinstance(meta, TensorMeta)
        dtype = str(live.dtype).removeprefix("torch.")
        assert (meta.shape, meta.stride, meta.dtype) == (tuple(live.shape), live.stride(), dtype)
    elif isinstance(live, (list, tuple)):
        assert type(meta) is type(live) and len(meta) == len(live)
        for a, b in zip(live, meta, strict=True):
            _assert_matches(a, b)
    elif isinstance(live, dict):
        assert meta.keys() == live.keys()
        for key in live:
            _assert_matches(live[key], meta[key])
    else:
        assert meta == live


def test_sample_store_loads_with_weights_only(demo_run):
    _profiler, _model, _samples, _frame, data, out = demo_run
    store = torch.load(out / "samples.pt", weights_only=True)
    for name, entries in data.items():
        for (calls, (args, _kw)), (stored_args, _stored_kw) in zip(entries, store["functions"][name], strict=True):
            for live, stored in zip(args, stored_args, strict=True):
                if isinstance(live, torch.Tensor):
                    assert torch.equal(live, stored)


def test_sample_tensors_over_the_limit_are_not_saved(tmp_path):
    model = nn.Linear(8, 8)
    profiler = ModuleFunctionKernelProfiler(sample_tensor_limit_mb=0)
    profiler.profile(model, [((torch.randn(2, 8),), {})], warmup_iterations=0, out=tmp_path / "run")
    assert not (tmp_path / "run" / "samples.pt").exists()
    assert profiler.run.manifest["sample_tensors"]["saved"] is False
    assert (tmp_path / "run" / "samples.json").exists()


def test_existing_run_directory_is_refused_before_running(tmp_path):
    (tmp_path / "run").mkdir()
    model = Raising(Boom("must not run"), 0)
    with pytest.raises(RunExistsError):
        ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2, 4),), {})], out=tmp_path / "run")
    assert model.calls == [0]


def test_temporary_run_and_samples_are_released():
    model = nn.Linear(8, 8)
    x = torch.randn(2, 8)
    profiler = ModuleFunctionKernelProfiler()
    _frame, data = profiler.profile(model, [((x,), {})], warmup_iterations=0)
    run_dir = profiler.run_dir
    assert run_dir.is_dir()
    ref = weakref.ref(x)
    del x, data
    gc.collect()
    assert ref() is not None, "samples keep the live inputs"
    profiler.profile(model, [((torch.randn(2, 8),), {})], warmup_iterations=0)
    gc.collect()
    assert ref() is None, "the next profile() releases them"
    assert not run_dir.exists(), "the previous temporary run directory is removed"
    current = profiler.run_dir
    del profiler
    gc.collect()
    assert not current.exists()


def test_a_pass_without_operators_gives_empty_frames():
    frame, data = ModuleFunctionKernelProfiler().profile(nn.Identity(), [((torch.randn(2),), {})], warmup_iterations=0)
    assert frame.empty and data == {}
    assert {"module_name", "module", "function_name", "op", "kernel", "kernel_us"} <= set(frame.columns)


def test_argument_errors():
    profiler = ModuleFunctionKernelProfiler()
    with pytest.raises(ValueError, match=r"not an nn.Module: fn is a function; name the model it runs, profile\(fn, "):
        profiler.profile(lambda: None)
    with pytest.raises(ValueError, match="warmup_iterations"):
        profiler.profile(nn.Identity(), warmup_iterations=-1)
    # "3" said only "'<' not supported between instances of 'str' and 'int'", 1.5 "'float' object cannot be
    # interpreted as an integer": neither named the argument
    for given, said in [("3", "a str"), (1.5, "a float"), (None, "None")]:
        with pytest.raises(TypeError, match=f"^warmup_iterations is {said}, not a whole number of passes"):
            profiler.profile(nn.Identity(), warmup_iterations=given)
    with pytest.raises(TypeError, match=r"not one string: \{'linear'\}"):  # set("linear") is its letters
        ModuleFunctionKernelProfiler(function_names="linear")


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear, self.calls = nn.Linear(4, 4), 0

    def forward(self, x):
        self.calls += 1
        return self.linear(x)


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


BAD_TAGS = {
    "str": "team=infra",
    "object": {"when": object()},
    "key": {1: "one"},
    "deep": {"deep": _nested(300)},
    "deeper than a manifest is read": {"deep": _nested(120)},
}


@pytest.mark.parametrize("tags", BAD_TAGS.values(), ids=BAD_TAGS.keys())
def test_bad_tags_fail_before_the_model_runs(tags, tmp_path):
    model = Counting()
    with pytest.raises(ValueError, match="^tags "):
        ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2, 4),), {})], out=tmp_path / "run", tags=tags)
    assert model.calls == 0 and not (tmp_path / "run").exists()


def test_the_deepest_tags_the_recorder_takes_are_read_back(tmp_path):
    from kernelscope.recorder.run_writer import checked_tags

    deepest = max(depth for depth in range(80, 130) if _accepted(checked_tags, {"deep": _nested(depth)}))
    assert not _accepted(checked_tags, {"deep": _nested(deepest + 1)})
    tags = {"deep": _nested(deepest)}
    ModuleFunctionKernelProfiler().profile(Counting(), [((torch.randn(2, 4),), {})], out=tmp_path / "run", tags=tags)
    with load_run(tmp_path / "run") as run:
        assert run.manifest["tags"] == tags


def _accepted(check, tags) -> bool:
    try:
        check(tags)
    except ValueError:
        return False
    return True


NAMESPACES = {"torch.Tensor": torch.Tensor, "torch.nn.functional": F, "torch.linalg": torch.linalg, "torch": torch}
LAZY = {"__slotnames__"}  # copyreg's cache, set on torch.Tensor the first time a tensor is copied or pickled


def _namespaces() -> dict:
    return {name: {k: v for k, v in vars(ns).items() if k not in LAZY} for name, ns in NAMESPACES.items()}


PRISTINE = _namespaces()  # at collection, before any recording of this process


@pytest.mark.parametrize(
    ("error", "after_calls"),
    [(None, 0), (Boom("model failed"), 3), (KeyboardInterrupt(), 2)],
    ids=["recorded", "model-raises-in-recording", "ctrl-c-in-patched-warm-up"],
)
def test_torch_namespaces_are_exactly_what_they_were(demo_run, error, after_calls):
    """The same attribute names holding the same objects in torch.Tensor (whose C methods the recorder sets on the
    class, then deletes again), torch.nn.functional, torch.linalg and torch, however the recording ends: compared
    with the namespaces before any recording of the process (torch itself, which gains the submodules its first
    recording imports, with the namespace right before this one)."""
    before = _namespaces()
    samples = [((torch.randn(2, 4),), {})]
    if error is None:
        ModuleFunctionKernelProfiler().profile(Raising(None, 10**9), samples, warmup_iterations=3)
    else:
        with pytest.raises(type(error)):
            ModuleFunctionKernelProfiler().profile(Raising(error, after_calls), samples, warmup_iterations=3)
    after = _namespaces()
    for name, attributes in {**PRISTINE, "torch": before["torch"]}.items():
        assert after[name].keys() == attributes.keys(), f"{name} gained or lost attributes"
        changed = sorted(key for key, value in attributes.items() if after[name][key] is not value)
        assert changed == [], f"{name}: {changed[:5]} are other objects"


def test_manifest_describes_the_recording(demo_run):
    profiler, *_ = demo_run
    manifest = profiler.run.manifest
    assert manifest["device"] == "cpu" and manifest["gpu_name"] is None
    assert manifest["torch_version"] == torch.__version__
    assert manifest["annotation"]["module_prefix"] == "ks.module:"
    assert manifest["rank"] == 0 and manifest["world_size"] == 1


def test_a_plain_torch_profiler_trace_analyzes(tmp_path):
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof, torch.no_grad():
        model(torch.randn(2, 8))
    prof.export_chrome_trace(str(tmp_path / "plain.json"))
    with load_run(tmp_path / "plain.json") as run:
        frame = run.profiling_df()
        calls = run.describe().set_index("function_name")["calls"].to_dict()
    assert len(frame) > 0 and frame["module_name"].isna().all()
    assert calls == {"aten::randn": 1, "aten::linear": 1, "aten::relu": 1}, "named after its outermost operators"
    assert "aten::clamp_min" in set(frame["op"]) and "aten::linear" in set(frame["call_op"])


def test_manifest_records_the_git_commit_of_the_working_directory(tmp_path, monkeypatch):
    from kernelscope.recorder import git_head

    outside = tmp_path / "plain"
    outside.mkdir()
    assert git_head.git_commit(outside) is None, "not a repository"
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True, timeout=30)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], check=True, timeout=30)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    monkeypatch.chdir(repo)
    profiler = ModuleFunctionKernelProfiler()
    profiler.profile(nn.Linear(2, 2), [((torch.randn(1, 2),), {})], warmup_iterations=0, out=tmp_path / "run")
    assert profiler.run.manifest["git_commit"] == head.strip()
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin-here"))  # git absent: no field, no failure
    assert git_head.git_commit(repo) is None


class _GcWatcher(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.gc_enabled: list[bool] = []

    def forward(self, x):
        self.gc_enabled.append(gc.isenabled() and gc.get_threshold()[0] > 0)  # whether allocations set it off
        return self.linear(x)


def test_the_garbage_collector_is_paused_while_the_scopes_are_in_place_only():
    model = _GcWatcher()
    assert gc.isenabled()
    ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2, 4),), {})], warmup_iterations=3)
    assert model.gc_enabled == [True, False, False, False], "a plain warm-up, then the patched warm-ups and the pass"
    assert gc.isenabled() and gc.get_threshold()[0] > 0, "enabled again afterwards"
    failing = Raising(Boom("forward failed"), 1)
    with pytest.raises(Boom):
        ModuleFunctionKernelProfiler().profile(failing, [((torch.randn(2, 4),), {})], warmup_iterations=1)
    assert gc.isenabled() and gc.get_threshold()[0] > 0, "enabled again after a failure"


class _GcSwitcher(nn.Module):
    """A model that turns the collector off at its first call, or sets its thresholds, for the rest of the process."""

    def __init__(self, switch):
        super().__init__()
        self.linear, self.switch = nn.Linear(4, 4), switch

    def forward(self, x):
        self.switch()
        return self.linear(x)


def test_what_the_model_sets_of_the_garbage_collector_stays_set_afterwards():
    thresholds = gc.get_threshold()
    try:
        # one warm-up: no plain pass before the patched ones, so the model's first call is inside the pause
        ModuleFunctionKernelProfiler().profile(_GcSwitcher(gc.disable), [((torch.randn(2, 4),), {})],
                                               warmup_iterations=1)  # fmt: skip
        assert not gc.isenabled(), "the model turned it off, as it would have unrecorded"
        gc.enable()
        ModuleFunctionKernelProfiler().profile(_GcSwitcher(lambda: gc.set_threshold(1234, 5, 6)),
                                               [((torch.randn(2, 4),), {})], warmup_iterations=1)  # fmt: skip
        assert gc.get_threshold() == (1234, 5, 6)
    finally:
        gc.enable()
        gc.set_threshold(*thresholds)


class _NoTraceOnly:
    """An experimental config of a torch without ``trace_only`` (torch 2.11)."""


def test_acc_events_only_where_torch_can_skip_building_its_event_objects(monkeypatch):
    from kernelscope.recorder import profiler

    monkeypatch.setattr(profiler, "experimental_config", _NoTraceOnly)
    assert "acc_events" not in profiler.profiler_options(), "it would make torch build its events at stop"
    with_trace_only = type("Config", (), {"trace_only": True})
    monkeypatch.setattr(profiler, "experimental_config", with_trace_only)
    if "acc_events" in profiler.inspect.signature(profiler.profile.__init__).parameters:
        assert profiler.profiler_options()["acc_events"] is True


def test_the_profiler_cycle_warning_is_hidden_and_no_other(recwarn):
    import warnings

    from kernelscope.recorder.profiler import quiet_cycle_warning

    with quiet_cycle_warning():  # torch 2.11's text, warned when acc_events is not passed
        warnings.warn(
            "Warning: Profiler clears events at the end of each cycle.Only events from the current cycle will be "
            "reported.To keep events across cycles, set acc_events=True.",
            UserWarning,
            stacklevel=1,
        )
        warnings.warn("another warning", UserWarning, stacklevel=1)
    assert [str(w.message) for w in recwarn] == ["another warning"]
