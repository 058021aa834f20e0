"""ks.bench: every distinct sample replayed as recorded (counts, layouts, devices), alternatives checked and timed,
samples that cannot be replayed listed with the reason; the call-name rule; the output comparison."""

import math
import os

import pandas as pd
import pytest
from conftest import REPO
from kernelscope.analyzer import KernelscopeError, load_run
from kernelscope.analyzer.call_times import call_times

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder.bench import bench, bench_savings  # noqa: E402
from kernelscope.recorder.compare import compare, tolerances  # noqa: E402
from kernelscope.recorder.layouts import rebuild  # noqa: E402
from kernelscope.recorder.replay import NotReplayable, resolve_call  # noqa: E402

FAST = {"repeat": 2, "warmup": 0}


@pytest.fixture(scope="module")
def layouts(layouts_run):
    """The layouts recording, loaded once for the tests that bench it more than once."""
    with load_run(layouts_run[1]) as run:
        yield run


def test_call_names_resolve_by_one_rule():
    assert resolve_call("linear").function is F.linear
    assert resolve_call("Tensor.__add__").function is torch.Tensor.__add__
    assert resolve_call("torch.addmm").function is torch.addmm
    assert resolve_call("torch.linalg.vector_norm").function is torch.linalg.vector_norm
    assert resolve_call("Tensor.mean").expression == "torch.Tensor.mean"
    for name, reason in [
        ("torch.compile", "compiled module or function"),
        ("torch.cuda.CUDAGraph.replay", "graph the model captured"),
        ("aten::lstm", "operator named from the trace"),
        ("ait_torch.nn.functional:linear", "not a name kernelscope gives"),
        ("torch.no_such_call", "does not exist"),
        ("no_such_functional", "does not exist"),
    ]:
        with pytest.raises(NotReplayable, match=reason):
            resolve_call(name)


def test_rebuild_makes_the_recorded_layout_with_the_stored_values():
    base = torch.arange(64.0).reshape(8, 8)
    for shape, stride in [((8, 4), (8, 1)), ((8, 8), (1, 8)), ((5, 4), (0, 1)), ((0, 3), (3, 1)), ((2, 3), (30, 10))]:
        values = torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)
        out = rebuild(values, shape, stride, "cpu")
        assert out.stride() == stride and out.storage_offset() == 0
        if stride[0] != 0:
            assert torch.equal(out, values)
    view = base[2:, 3:]  # stored with its strides: the offset is kept (the same alignment)
    out = rebuild(view, view.shape, view.stride(), "cpu")
    assert (out.stride(), out.storage_offset()) == (view.stride(), view.storage_offset()) and torch.equal(out, view)
    expanded = rebuild(torch.tensor([1.0, 2.0]).expand(3, 2).clone(), (3, 2), (0, 1), "cpu")
    assert expanded.stride() == (0, 1) and expanded.tolist() == [[1.0, 2.0]] * 3
    with pytest.raises(ValueError, match="shape"):
        rebuild(torch.zeros(2, 2), (4,), (1,), "cpu")


def test_every_distinct_sample_is_replayed_once_with_its_recorded_calls_and_time(layouts_run):
    _, out = layouts_run
    frame = bench(out, ["gelu", "Tensor.__add__", "torch.addmm"], **FAST)
    with load_run(out) as run:
        expected = run.sql("SELECT * FROM samples").set_index(["function_name", "sample_id"])
        recorded = {f: call_times(run, f).set_index("sample_id") for f in ("gelu", "Tensor.__add__", "torch.addmm")}
        pass_us = run.sql("SELECT sum(kernel_us) AS us FROM kernels")["us"][0]
    assert list(frame["function_name"].unique()) == ["gelu", "Tensor.__add__", "torch.addmm"]
    assert (frame["status"] == "ok").all() and (frame["implementation"] == "original").all()
    assert len(frame) == 6  # two distinct samples each, once each
    for row in frame.itertuples():
        assert row.calls == expected.loc[(row.function_name, row.sample_id), "calls"]
        total = recorded[row.function_name].loc[row.sample_id, "recorded_us"]
        assert row.recorded_us == pytest.approx(total / row.calls) and row.weight_us == pytest.approx(total)
        assert row.share_pct == pytest.approx(100 * total / pass_us)
        assert row.min_us <= row.replayed_us <= row.max_us and row.replayed_us > 0
        assert row.ratio == pytest.approx(row.replayed_us / row.recorded_us)  # cpu against cpu: compared
        assert row.recorded_on == row.replayed_on == "cpu"
    assert frame.loc[frame["function_name"] == "Tensor.__add__", "calls"].tolist() == [4, 2]


def test_nested_calls_count_in_the_recorded_time_of_the_call_that_makes_them():
    with load_run(REPO / "sample_traces" / "demo") as run:
        inclusive = call_times(run, "multi_head_attention_forward")["recorded_us"].sum()
        own = run.sql("SELECT sum(kernel_us) FROM kernels WHERE function_name = 'multi_head_attention_forward'")
        inner = run.sql(
            "SELECT sum(kernel_us) FROM kernels WHERE function_name IN ('linear', 'scaled_dot_product_attention') "
            "AND module_name = 'encoder.self_attn'"
        )
    assert inclusive == pytest.approx(own.iloc[0, 0] + inner.iloc[0, 0])


def test_non_contiguous_inputs_are_replayed_with_their_recorded_strides(layouts):
    seen = []

    def spy(function):
        def alternative(*args, **kwargs):
            seen.append((function.__name__, [tuple(a.stride()) for a in args if isinstance(a, torch.Tensor)]))
            return function(*args, **kwargs)

        return alternative

    stored = layouts.function_data(tensors=True)
    assert stored["gelu"][0][1][0][0].stride() == (8, 1), "samples.pt holds the slice dense: the replay rebuilds it"
    for name, function, strides in [("gelu", F.gelu, (32, 1)), ("relu", F.relu, (1, 32)), ("silu", F.silu, (0, 1))]:
        seen.clear()
        frame = bench(layouts, [name], against={"spy": spy(function)}, **FAST)
        assert set(frame["status"]) == {"ok"}
        assert seen and all(s == [strides] for _, s in seen), (name, seen)
    seen.clear()
    bench(layouts, ["torch.addmm"], against={"spy": spy(torch.addmm)}, **FAST)
    assert seen and all(s[2] == (1, 32) for _, s in seen)


def test_a_matching_alternative_gets_its_speedup_and_saving(layouts):
    frame = bench(layouts, ["Tensor.__add__"], against={"torch.add": lambda x, y: torch.add(x, y)}, **FAST)
    original = frame[frame["implementation"] == "original"].set_index("sample_id")
    alternative = frame[frame["implementation"] == "torch.add"].set_index("sample_id")
    assert set(alternative["status"]) == {"ok"} and (alternative["max_abs_err"] == 0).all()
    for sample_id, row in alternative.iterrows():
        assert row["speedup"] == pytest.approx(original.loc[sample_id, "replayed_us"] / row["replayed_us"])
        saved = row["calls"] * (original.loc[sample_id, "replayed_us"] - row["replayed_us"])
        assert row["saving_us"] == pytest.approx(saved)
    total = bench_savings(frame)
    assert total[["function_name", "implementation", "samples", "calls"]].values.tolist() == [
        ["Tensor.__add__", "torch.add", 2, 6]
    ]
    assert total["saving_us"][0] == pytest.approx(alternative["saving_us"].sum())
    assert total["saving_pct"][0] == pytest.approx(alternative["saving_pct"].sum())


def test_a_wrong_or_failing_alternative_is_reported_per_sample(layouts):
    wrong = {"no bias": lambda b, x, w: x @ w, "raises": lambda *a: 1 / 0}
    frame = bench(layouts, ["torch.addmm"], against=wrong, **FAST)
    wrong = frame[frame["implementation"] == "no bias"]
    assert set(wrong["status"]) == {"mismatch"}
    assert (wrong["max_abs_err"] > 0.1).all() and wrong["reason"].str.contains("Mismatched elements").all()
    raising = frame[frame["implementation"] == "raises"]
    assert set(raising["status"]) == {"failed"} and raising["reason"].str.startswith("ZeroDivisionError").all()
    assert bench_savings(frame).empty  # no saving from an alternative that does not match


def test_samples_that_cannot_be_replayed_are_listed_with_the_reason(layouts):
    frame = bench(layouts, ["softplus", "Tensor.__getitem__"], **FAST)
    softplus = frame[frame["function_name"] == "softplus"]
    assert list(softplus["status"]) == ["not kept"] * 2 and list(softplus["calls"]) == [2, 1]
    assert softplus["reason"].str.contains("sample_memory_limit_mb=0.5").all()
    assert softplus["replayed_us"].isna().all() and softplus["recorded_us"].notna().all()
    getitem = frame[frame["function_name"] == "Tensor.__getitem__"]
    assert set(getitem["status"]) == {"refused"} and getitem["reason"].str.contains("builtins.slice").all()


def test_a_live_profiler_replays_its_own_inputs_even_those_samples_pt_cannot_hold(layouts_run):
    profiler, _ = layouts_run
    frame = bench(profiler, ["Tensor.__getitem__", "softplus", "gelu"], **FAST)
    status = frame.groupby("function_name")["status"].agg(set).to_dict()
    assert status == {"Tensor.__getitem__": {"ok"}, "softplus": {"not kept"}, "gelu": {"ok"}}
    assert frame["recorded_us"].notna().all() and frame["recorded_on"].eq("cpu").all()


def test_function_data_alone_is_weighed_by_its_replayed_time(layouts_run):
    profiler, _ = layouts_run
    frame = bench({"gelu": profiler.book.function_data()["gelu"]}, **FAST)
    assert list(frame["function_name"]) == ["gelu", "gelu"]
    assert frame["recorded_us"].isna().all() and frame["share_pct"].isna().all()
    assert frame["weight_us"].tolist() == pytest.approx((frame["calls"] * frame["replayed_us"]).tolist())


def test_a_run_recorded_on_cuda_replayed_on_the_cpu_says_so():
    demo = REPO / "sample_traces" / "demo"
    with pytest.warns(RuntimeWarning, match=r"recorded on cuda \(NVIDIA H200\) and is replayed on cpu"):
        frame = bench(demo, ["Tensor.__add__"], device="cpu", **FAST)
    assert set(frame["recorded_on"]) == {"cuda (NVIDIA H200)"} and set(frame["replayed_on"]) == {"cpu"}
    assert frame["ratio"].isna().all() and frame["replayed_us"].notna().all()
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="--device cpu"):
            bench(demo, ["Tensor.__add__"], **FAST)


def test_calls_without_inputs_to_replay_are_refused_with_the_reason():
    with pytest.warns(RuntimeWarning, match="replayed on cpu"):
        frame = bench(REPO / "sample_traces" / "compiled", ["torch.compile"], device="cpu", **FAST)
    assert set(frame["status"]) == {"refused"} and frame["reason"].str.contains("compiled module").all()
    with pytest.warns(RuntimeWarning, match="replayed on cpu"):
        frame = bench(REPO / "sample_traces" / "cuda_graph_format3", ["torch.cuda.CUDAGraph.replay"], device="cpu")
    assert len(frame) == 1 and frame["status"][0] == "refused" and frame["sample_id"].isna().all()
    assert "graph the model captured" in frame["reason"][0]


def test_a_run_without_samples_pt_is_refused_naming_the_option_that_keeps_it():
    with pytest.raises(KernelscopeError, match=r"samples\.pt was not saved.*sample_tensor_limit_mb=None"):
        bench(REPO / "sample_traces" / "mlp", device="cpu")
    with pytest.raises(KernelscopeError, match="not a run directory: it has no samples to replay"):
        bench(REPO / "sample_traces" / "plain_kineto" / "misc.json.gz", device="cpu")


def test_bad_arguments_are_refused_before_any_replay(layouts):
    with pytest.raises(ValueError, match="no call named 'nope'"):
        bench(layouts, ["nope"])
    with pytest.raises(ValueError, match="replaces one call"):
        bench(layouts, ["gelu", "relu"], against={"x": F.gelu})
    with pytest.raises(ValueError, match="not MODULE:CALLABLE"):
        bench(layouts, ["gelu"], against={"x": "torch.nn.functional.gelu"})
    # was ModuleNotFoundError "No module named 'no_such_kernels'": neither the alternative nor where it was looked for
    missing = r"^alternative 'x' \('no_such_kernels:gelu'\): no module named 'no_such_kernels' here \(.*\) or on the"
    with pytest.raises(ValueError, match=missing):
        bench(layouts, ["gelu"], against={"x": "no_such_kernels:gelu"})
    with pytest.raises(TypeError, match=r"not one string: \['gelu'\]"):  # iterated, it was 'no call named "g"'
        bench(layouts, "gelu")


def test_a_profiler_recorded_without_out_is_named_as_itself_not_by_its_scratch_folder():
    """bench(profiler, ["nope"]) said "/tmp/kernelscope-tzo0l22l has no call named 'nope'": a folder the user never
    named (profile() without out= records into one of its own)."""
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    profiler = ModuleFunctionKernelProfiler()
    profiler.profile(torch.nn.Linear(4, 4), [((torch.randn(2, 4),), {})], warmup_iterations=0)
    with pytest.raises(ValueError, match=r"^the profiler's recording has no call named 'nope' \(its calls: linear\)"):
        bench(profiler, ["nope"])


def test_the_comparison_uses_tolerances_by_dtype_and_reports_the_largest_errors():
    assert tolerances(torch.float16) == (1e-2, 1e-2) and tolerances(torch.float32, atol=0.5) == (1e-3, 0.5)
    assert tolerances(torch.int64) == (0.0, 0.0)
    x = torch.ones(4, dtype=torch.float16)
    assert compare(x + 0.004, x).match and not compare(x + 0.05, x).match
    assert compare(x + 0.05, x, rtol=0.1, atol=0.1).match
    verdict = compare((x * 2, {"k": 1}), (x, {"k": 1}))
    assert not verdict.match and verdict.max_abs_err == 1.0 and verdict.max_rel_err == 1.0
    assert "items" in compare((x,), (x, x)).reason and "original's 2" in compare(1, 2).reason
    assert not compare(torch.ones(3), torch.ones(4)).match
    assert compare(torch.tensor([math.nan, math.inf]), torch.tensor([math.nan, math.inf])).max_abs_err == 0


def test_crafted_devices_and_strides_are_refused_per_sample_and_left_out_of_scripts(layouts_run, tmp_path):
    """samples.json may name any device and strides: a device torch does not know, or strides whose storage would
    take more than the machine's memory allows, refuse that sample (a row with the reason), never a traceback of
    the replay or of --scripts, nor an allocation of terabytes."""
    import json
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(layouts_run[1], run_dir)
    doc = json.loads((run_dir / "samples.json").read_text())
    name = "gelu"
    first, second = (sample["args"]["tuple"][0]["tensor"] for sample in doc["functions"][name][:2])
    first["device"] = "evil:0"
    second["stride"] = [10**12] + second["stride"][1:]
    (run_dir / "samples.json").write_text(json.dumps(doc))
    with load_run(run_dir) as run:
        frame = bench(run, [name], scripts=tmp_path / "scripts", **FAST)
    refused = frame[frame["status"] == "refused"].set_index("sample_id")["reason"]
    assert refused[0] == "args[0] was recorded on 'evil:0', a device this torch does not know"
    assert refused[1].startswith("args[0] has strides [1000000000000, ") and "would take more than" in refused[1]
    kept = sorted(set(frame["sample_id"]) - {0, 1})
    store = tmp_path / "scripts" / f"{name}.samples.pt"
    assert (
        [s["sample_id"] for s in torch.load(store, weights_only=True)["samples"]] == kept
        if kept
        else not store.exists()
    )


class _Uncopyable(torch.Tensor):
    """A tensor subclass whose values cannot be copied out, so no replay can make its sample's inputs."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.copy_, torch.Tensor.to):
            raise RuntimeError("an _Uncopyable tensor cannot be copied")
        return super().__torch_function__(func, types, args, kwargs or {})


def test_samples_a_script_cannot_replay_are_left_out_of_it_with_the_reason(tmp_path):
    """A live sample whose inputs cannot be made, cannot be pickled, or hold what the script's
    torch.load(weights_only=True) refuses is left out of --scripts with a warning naming it, never a traceback or
    a script that fails as it loads its samples."""
    import threading

    x = torch.randn(4, 4)
    data = {
        "gelu": [
            (1, ((x.as_subclass(_Uncopyable),), {})),
            (1, ((x,), {"approximate": threading.Lock()})),
            (1, ((x,), {"approximate": "tanh"})),
        ],
        "Tensor.__getitem__": [(1, ((x, (slice(0, 2), 1)), {}))],
    }
    scripts = tmp_path / "scripts"
    with pytest.warns(RuntimeWarning) as caught:
        frame = bench(data, ["gelu", "Tensor.__getitem__"], scripts=scripts, **FAST)
    messages = [str(w.message) for w in caught]
    assert messages == [
        "kernelscope: gelu sample 0 (RuntimeError: an _Uncopyable tensor cannot be copied), sample 1 (TypeError: "
        f"cannot pickle '_thread.lock' object) cannot be replayed by a standalone script, so {scripts}/gelu.py "
        "leaves them out",
        "kernelscope: Tensor.__getitem__ sample 0 (holds builtins.slice, which torch.load(weights_only=True) does "
        "not read) cannot be replayed by a standalone script, so no script of Tensor.__getitem__ is written",
    ]
    assert sorted(p.name for p in scripts.iterdir()) == ["gelu.py", "gelu.samples.pt"]
    assert [s["sample_id"] for s in torch.load(scripts / "gelu.samples.pt", weights_only=True)["samples"]] == [2]
    assert "on the 1 distinct input sample kernelscope recorded" in (scripts / "gelu.py").read_text(), "one: sample"
    status = frame.set_index(["function_name", "sample_id"])["status"].to_dict()
    assert status == {("gelu", 0): "failed", ("gelu", 1): "failed", ("gelu", 2): "ok", ("Tensor.__getitem__", 0): "ok"}


def test_script_names_are_the_calls_names_and_never_shared():
    from kernelscope.recorder.bench_scripts import script_stems

    names = ["linear", "Tensor.__add__", "torch.linalg.vector_norm", "a/b", "a_b", "a b", "torch.gradient",
             "torch.Gradient", ".hidden"]  # fmt: skip
    stems = script_stems(names)
    assert [stems[name] for name in names[:3]] == names[:3] and stems["a_b"] == "a_b", "the common names as they are"
    assert len({stem.lower() for stem in stems.values()}) == len(names), "unique, also where letter case is not told"
    assert all(
        stems[name].startswith(prefix)
        for name, prefix in [
            ("a/b", "a_b-"),
            ("a b", "a_b-"),
            ("torch.gradient", "torch.gradient-"),
            ("torch.Gradient", "torch.Gradient-"),
            (".hidden", "_hidden-"),
        ]
    )
    assert script_stems(["a/b"]) == {"a/b": stems["a/b"]}, "a name's own file, whichever others are written with it"


def test_a_call_whose_name_is_too_long_for_a_file_gets_a_file_name_that_fits(tmp_path):
    """A run shared with the user names its calls: one of 300 characters made a file name past the 255 bytes of a
    file system, and writing the scripts failed after the others were written."""
    from kernelscope.analyzer.atomic import make_temp_file
    from kernelscope.recorder.bench_scripts import script_paths, script_stems

    names = ["a" * 300, "a" * 300 + "b", "x/" * 200, "linear"]
    stems = script_stems(names)
    assert stems["linear"] == "linear" and len(set(stems.values())) == len(names)
    for stem in stems.values():
        for path in script_paths(tmp_path, stem):
            path.write_text("")
            os.unlink(make_temp_file(tmp_path, f".{path.name}."))  # the sibling replace_atomically writes through


def test_calls_whose_names_make_one_file_name_each_get_their_script(tmp_path, monkeypatch):
    from kernelscope.recorder import bench as bench_module
    from kernelscope.recorder.replay import Callee

    monkeypatch.setattr(bench_module, "resolve_call", lambda name: Callee(name, F.relu, "torch.nn.functional.relu"))
    data = {"a/b": [(1, ((torch.randn(2),), {}))], "a_b": [(1, ((torch.randn(3),), {}))]}
    bench(data, list(data), scripts=tmp_path, **FAST)
    scripts = sorted(path.name for path in tmp_path.glob("*.py"))
    assert len(scripts) == 2 and "a_b.py" in scripts, scripts
    for script in scripts:
        [sample] = torch.load(tmp_path / script.replace(".py", ".samples.pt"), weights_only=True)["samples"]
        expected = (2,) if script != "a_b.py" else (3,)
        assert sample["args"][0].shape == expected, "each script holds its own call's samples"


def test_recorded_times_take_each_device_event_from_its_own_runtime_s_launch(tmp_path):
    """Two runtimes number their calls apart, so a device event's correlation can name a launch of each
    (test_two_runtimes.py): call_times joined by correlation alone, so each such kernel counted for the calls around
    both launches. The demo recording with half its launches moved to a second runtime times every sample as the
    original does."""
    import gzip
    import json
    import shutil

    from test_two_runtimes import SECOND, _two_runtimes

    demo = REPO / "sample_traces" / "demo"
    run_dir = tmp_path / "two_runtimes"
    shutil.copytree(demo, run_dir)
    doc = _two_runtimes(json.loads(gzip.decompress((demo / "trace.json.gz").read_bytes())), SECOND["xpu"])
    assert sum(e.get("cat") == "xpu_runtime" for e in doc["traceEvents"]) > 10
    (run_dir / "trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    with load_run(demo) as original, load_run(run_dir) as run:
        functions = original.sql("SELECT DISTINCT function_name FROM samples ORDER BY 1")["function_name"]
        for function in functions:
            pd.testing.assert_frame_equal(call_times(run, function), call_times(original, function), obj=function)


def test_a_median_far_above_the_fastest_repeat_is_warned_of(layouts_run, monkeypatch):
    """On a CPU other processes kept busy, a replay on two threads waited for a descheduled one at most repeats:
    `bench demo-run` showed linear sample 0 at 16,143 µs (its fastest repeat 20 µs) beside samples at 16 µs, a
    thousand-fold "slower" sample with nothing saying its median was noise. A warning names the replays whose median
    is over 10x their fastest repeat; a replay whose repeats agree gets none."""
    import warnings

    import kernelscope.recorder.bench as bench_module

    profiler, _ = layouts_run
    gelu = {"gelu": profiler.book.function_data()["gelu"]}
    monkeypatch.setattr(bench_module, "time_call", lambda *args: (20.0, 16143.0, 47390.0))
    with pytest.warns(RuntimeWarning, match=r"2 of 2 replays' median is over 10x their fastest repeat \(gelu sample "
                      r"0: 16,143\.0 µs, min_us 20\.0\)"):  # fmt: skip
        bench(gelu, repeat=5, warmup=0)
    monkeypatch.setattr(bench_module, "time_call", lambda *args: (20.0, 25.0, 400.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        bench(gelu, repeat=5, warmup=0)
    monkeypatch.setattr(bench_module, "time_call", lambda *args: (20.0, 16143.0, 47390.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        bench(gelu, **FAST)  # 2 repeats: no median to judge by


def test_a_cpu_replay_that_had_the_cpu_a_small_part_of_its_time_is_warned_of(layouts_run, monkeypatch):
    """With cpu2's load at 15 on 2 cores, F.gelu of 512 floats replayed at 18 to 40 ms a call, every repeat alike:
    the process waited for the CPU, and no spread said so. The process's CPU time over the replay's wall clock
    does: under half, a warning says the times hold those waits."""
    import kernelscope.recorder.bench as bench_module

    profiler, _ = layouts_run
    gelu = {"gelu": profiler.book.function_data()["gelu"]}
    clock = iter(range(0, 10**6, 10))  # each replay: 10 s of wall clock ...
    monkeypatch.setattr(bench_module, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(bench_module, "process_time", lambda: 0.0)  # ... and no CPU time
    monkeypatch.setattr(bench_module, "time_call", lambda *args: (20000.0, 25000.0, 40000.0))
    with pytest.warns(
        RuntimeWarning,
        match=r"the replays had the CPU for 0% of their wall clock \(gelu sample 0, the least; 2 of 2 under 50%\)",
    ):
        bench(gelu, repeat=5, warmup=0)
