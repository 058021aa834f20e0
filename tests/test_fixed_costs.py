"""What profile() caches or skips to keep its fixed cost small gives the results it would give without: the torch
call targets and the wrappers follow the namespaces, temporary runs alone skip the flush, the writing probe and the
staging folder, the prepared connection is a full one."""

from __future__ import annotations

import collections
import functools
import gc
import subprocess
import types
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.analyzer import connection  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler, calls, run_writer  # noqa: E402
from torch import nn  # noqa: E402


def test_torch_call_targets_follow_a_rebound_namespace(monkeypatch):
    assert (torch, "addmm", "torch.addmm") in calls.torch_call_targets()  # chosen, and now cached
    monkeypatch.setattr(torch, "addmm", torch.nn.functional.relu)  # no longer torch's operator, nor a library's
    monkeypatch.setattr(torch, "baddbmm", lambda *args, **kwargs: None)  # a library's: scoped by its name
    monkeypatch.setattr(torch.Tensor, "kernelscope_test_method", lambda self: self, raising=False)
    if torch.distributed.is_available():
        assert (torch.distributed, "all_reduce", "torch.distributed.all_reduce") in calls.torch_call_targets()
        monkeypatch.setattr(torch.distributed, "all_reduce", len)  # not a Python function: not a collective to patch
    targets = calls.torch_call_targets()
    assert (torch.distributed, "all_reduce", "torch.distributed.all_reduce") not in targets
    assert (torch, "addmm", "torch.addmm") not in targets and (torch, "baddbmm", "torch.baddbmm") in targets
    assert (torch.Tensor, "kernelscope_test_method", "Tensor.kernelscope_test_method") in targets
    assert targets == calls._choose_targets()


def test_only_runs_written_to_out_are_flushed_and_probed(tmp_path, monkeypatch):
    flushed, probed = [], []
    monkeypatch.setattr(run_writer, "_sync", flushed.append)
    make_folder = run_writer.tempfile.mkdtemp

    def watched_mkdtemp(*args, **kwargs):
        if kwargs.get("suffix") == ".probe":
            probed.append(kwargs["dir"])
        return make_folder(*args, **kwargs)

    monkeypatch.setattr(run_writer.tempfile, "mkdtemp", watched_mkdtemp)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval()
    samples = [((torch.randn(2, 8),), {})]
    profiler = ModuleFunctionKernelProfiler()
    profiler.profile(model, samples, warmup_iterations=1)
    assert flushed == [], "a temporary run is removed with its profiler: nothing to flush"
    assert probed == [], "a temporary run's folder is the profiler's own: nothing to probe"
    assert not profiler.run._views_defined, "profile()'s own frames need no view"
    assert profiler.run.sql("SELECT count(*) AS n FROM summary")["n"][0] > 0  # defined at first use
    profiler.profile(model, samples, warmup_iterations=1, out=tmp_path / "run")
    assert len(flushed) == 1 and flushed[0].name.endswith(".partial")
    assert probed == [tmp_path, tmp_path], "probed before the model runs, and again before writing"
    assert profiler.run.manifest["git_commit"] is None or len(profiler.run.manifest["git_commit"]) in (40, 64)
    profiler.release()


def test_a_temporary_run_is_written_into_the_profilers_own_folder_with_no_staging_folder(monkeypatch):
    staged, renamed = [], []
    make_temp_dir = run_writer.make_temp_dir
    monkeypatch.setattr(run_writer, "make_temp_dir", lambda *args: staged.append(args) or make_temp_dir(*args))
    monkeypatch.setattr(run_writer, "_move_into_place", lambda *args: renamed.append(args))
    profiler = ModuleFunctionKernelProfiler()
    frame, _ = profiler.profile(nn.Linear(8, 8).eval(), [((torch.randn(2, 8),), {})], warmup_iterations=1)
    assert staged == [] and renamed == [], "nobody reads a temporary run before it is whole: nothing to stage"
    run_dir = profiler.run_dir
    assert sorted(p.name for p in run_dir.iterdir()) == ["manifest.json", "samples.json", "trace.json.gz"]
    assert run_dir.name.startswith("kernelscope-") and len(frame) > 0
    profiler.release()
    assert not run_dir.exists(), "the folder goes with the run"


def _instance(con):
    """The database instance a leased connection is on."""
    return connection._leases[id(con)].instance


def _macros_work(con) -> bool:
    con.execute(
        "SET VARIABLE ks_key_bits = {t: 10::UTINYINT, d: 10::UTINYINT, i: 10::UTINYINT, t0: 0::BIGINT, packed: true}"
    )
    key = (5 << 21) | ((2**10 - 1 - 4) << 11) | (1 << 10) | 3  # start 5, 4 ns long, no frame, event 3
    return con.execute("SELECT ks_span_order(5, 9, false, 3)").fetchone()[0] == {"s": key, "e": 0, "r": 0, "id": 3}


def test_an_instance_serves_the_next_run_with_nothing_of_the_last(monkeypatch):
    first = connection.connect()
    instance = _instance(first)
    assert _macros_work(first)
    first.execute("CREATE TABLE events AS SELECT 1 AS a; CREATE TEMP TABLE ks_items AS SELECT 2 AS b")
    connection.close(first)
    second = connection.connect()
    assert _instance(second) is instance, "a run nobody else saw leaves its instance to the next"
    tables = second.execute("SELECT table_name FROM duckdb_tables()").fetchall()
    assert tables == [] and second.execute("SELECT getvariable('ks_key_bits')").fetchone() == (None,)
    assert _macros_work(second)
    second.execute("CREATE TABLE kernels AS SELECT 1 AS a")
    del second  # garbage collected without close(): the same
    import gc

    gc.collect()
    third = connection.connect()
    assert _instance(third) is instance
    assert third.execute("SELECT count(*) FROM duckdb_tables()").fetchone() == (0,)
    connection.shared(third).execute("CREATE OR REPLACE MACRO ks_scope_call(name) AS 'changed'")  # a user's SQL
    connection.close(third)
    fourth = connection.connect()
    assert _instance(fourth) is not instance, "an instance a user's SQL may have changed is not used again"
    assert fourth.execute("SELECT ks_scope_call('x')").fetchone() == (None,)
    fourth.execute(f"SET {connection.SET_BY_LARGE_RUNS} = '64MB'")  # what a large run sets, which stays
    large = _instance(fourth)
    connection.close(fourth)
    fifth = connection.connect()
    assert _instance(fifth) is not large
    connection.close(fifth)


def test_a_leased_connection_has_the_join_settings_of_its_instance_with_no_statement_of_its_own(monkeypatch):
    connection.close(connection.connect())  # an instance idle, made with them
    ran = []
    monkeypatch.setattr(connection, "run_sql_file", lambda con, name, **kwargs: ran.append(name))
    for sized in (False, True):
        con = connection.connect(sized=sized)
        settings = "SELECT current_setting('prefer_range_joins'), current_setting('merge_join_threshold')"
        assert con.execute(settings).fetchone() == (True, 0) and ran == []
        connection.close(con)


def test_a_run_loaded_on_a_used_instance_reads_the_same(tmp_path):
    from kernelscope.analyzer import load_run

    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval()
    profiler = ModuleFunctionKernelProfiler()
    profiler.profile(model, [((torch.randn(2, 8),), {})], warmup_iterations=1, out=tmp_path / "run")
    profiler.release()
    frames, instances = [], []
    for _ in range(3):
        run = load_run(tmp_path / "run")
        instances.append(_instance(run._con))
        frames.append(run.profiling_df())
        run.close()
    assert instances[0] is instances[1] is instances[2]
    assert frames[0].equals(frames[1]) and frames[0].equals(frames[2])


def test_no_instance_checkpoints_however_much_its_runs_write():
    # a checkpoint compresses every table at whichever commit crosses the threshold: 0.4 s every third 100 MB load
    from kernelscope.analyzer.memory import memory_bytes

    connection._close_instances()
    fresh = connection.connect()
    instance = _instance(fresh)
    connection.close(fresh)
    reused = connection.connect()
    assert _instance(reused) is instance
    threshold = reused.execute("SELECT current_setting('checkpoint_threshold')").fetchone()[0]
    assert memory_bytes(threshold) >= 1 << 40, threshold
    connection.close(reused)


def test_a_prepared_instance_is_taken_once_and_has_the_macros(monkeypatch):
    connection._close_instances()  # none idle: prepare() makes one
    prepared = connection.prepare()
    assert not prepared.done() or prepared.result() is not None
    first, second = connection.connect(), connection.connect()
    assert _instance(first) is prepared.result()[0] and _instance(second) is not _instance(first)
    for con in (first, second):
        assert _macros_work(con)
        connection.close(con)
    connection._close_instances()
    made = connection._made

    def fails_once(database):
        monkeypatch.setattr(connection, "_made", made)
        raise connection.duckdb.IOException("made on the thread: fails")

    monkeypatch.setattr(connection, "_made", fails_once)
    connection.prepare().exception()
    con = connection.connect()  # the failure on the thread is not the caller's: it makes one there and then
    assert con.execute("SELECT 1").fetchone() == (1,)
    connection.close(con)


class _SeesItsWrappers(nn.Module):
    """Keeps the F.linear and Tensor.relu its forward calls (the recorder's wrappers, while recording)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 4))
        # a deque, which no scan reads: the functionals a model keeps in its lists are the originals after a recording
        self.seen: collections.deque[tuple] = collections.deque()

    def forward(self, x):
        self.seen.append((F.linear, vars(torch.Tensor).get("relu")))
        return F.linear(x, self.weight).relu()


def test_wrappers_are_made_once_and_a_rebound_function_gets_its_own(monkeypatch):
    model = _SeesItsWrappers()
    samples = [((torch.randn(2, 4),), {})]
    profiler = ModuleFunctionKernelProfiler()
    first_data = profiler.profile(model, samples, warmup_iterations=0)[1]
    profiler.profile(model, samples, warmup_iterations=0)
    (linear, relu), (linear_again, relu_again) = model.seen
    assert linear.__wrapped__ is torch._C._nn.linear and relu.__wrapped__ is torch._C.TensorBase.relu
    assert linear_again is linear and relu_again is relu, "the second recording puts the same wrappers in place"
    original_linear, original_relu = F.linear, torch._C.TensorBase.relu
    rebound_calls = []

    @functools.wraps(original_linear)  # as a library that wraps F.linear does: its __module__ is F's
    def rebound_linear(*args, **kwargs):
        rebound_calls.append("linear")
        return original_linear(*args, **kwargs)

    def rebound_relu(self):
        rebound_calls.append("relu")
        return original_relu(self)

    monkeypatch.setattr(F, "linear", rebound_linear)
    monkeypatch.setattr(torch.Tensor, "relu", rebound_relu, raising=False)
    frame, data = profiler.profile(model, samples, warmup_iterations=0)
    linear_now, relu_now = model.seen[-1]
    assert linear_now is not linear and linear_now.__wrapped__ is rebound_linear, "the rebound function is wrapped"
    assert relu_now is not relu and relu_now.__wrapped__ is rebound_relu
    assert rebound_calls == ["linear", "relu"], "the wrappers call the functions now bound"
    assert {name: [calls for calls, _ in entries] for name, entries in data.items()} == {
        name: [calls for calls, _ in entries] for name, entries in first_data.items()
    } == {"linear": [1], "Tensor.relu": [1]}
    assert F.linear is rebound_linear and vars(torch.Tensor)["relu"] is rebound_relu, "put back as rebound"
    profiler.release()


def test_no_wrapper_holds_a_recording_past_it():
    from kernelscope.recorder.instrument import instrumented
    from kernelscope.recorder.retention import CappedSampleBook

    model = _SeesItsWrappers()
    x = torch.randn(2, 4)
    book = CappedSampleBook(None)
    with instrumented(list(model.named_modules()), book, None), torch.no_grad():
        expected = model(x)
    assert list(book.samples) == ["linear", "Tensor.relu"]
    gone = weakref.ref(book)
    del book
    gc.collect()
    assert gone() is None, "the wrappers called in the recording let go of its sample book"
    linear, relu = model.seen[0]  # wrappers kept past their recording run their functions, unscoped
    assert torch.equal(relu(linear(x, model.weight)), expected)


def test_patches_set_at_once_are_undone_exactly():
    from kernelscope.recorder.instrument import _Patches

    module = types.ModuleType("kernelscope_test_namespace")
    module.kept = kept = object()

    class Owner:
        inherited = "inherited"

    class Child(Owner):
        own = "own"

    before_module, before_child = dict(vars(module)), dict(vars(Child))
    patches = _Patches()
    patches.set_all(module, {"kept": 1, "added": 2})
    patches.set_all(Child, {"own": 3, "inherited": 4})
    patches.set_item(vars(module), "kept", 5)  # a later patch of the same attribute is undone first
    assert (module.kept, module.added, Child.own, Child.inherited) == (5, 2, 3, 4)
    patches.undo()
    assert vars(module) == before_module and vars(module)["kept"] is kept
    assert dict(vars(Child)) == before_child and Child.inherited == "inherited"


def test_a_known_commit_is_answered_again_until_git_changes_it(tmp_path, monkeypatch):
    from kernelscope.recorder import git_head

    repo = tmp_path / "repo"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-C", str(repo)]

    def commit() -> str:
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True, timeout=30)
        return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()

    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    sub = repo / "sub"
    sub.mkdir()
    first = commit()
    asked = []
    run = git_head.run
    monkeypatch.setattr(git_head, "run", lambda arguments, *rest: asked.append(arguments) or run(arguments, *rest))
    git_head.forget()
    assert git_head.git_commit(sub) == first and len(asked) == 1
    assert git_head.git_commit(sub) == first and len(asked) == 1, "known: git is not asked again"
    assert git_head.git_commit_in_background(sub).result(0) == first, "known: answered without a thread"
    second = commit()
    assert git_head.git_commit(sub) == second, "a commit on the branch"
    subprocess.run([*git, "checkout", "-q", "--detach"], check=True, timeout=30)
    subprocess.run([*git, "pack-refs", "--all"], check=True, timeout=30)
    assert git_head.git_commit(sub) == second
    third = commit()
    assert git_head.git_commit(sub) == third, "a commit on a detached HEAD"
    subprocess.run([*git, "checkout", "-q", "-"], check=True, timeout=30)
    assert git_head.git_commit(sub) == second, "a checkout"
    git[-1] = str(sub)
    subprocess.run(["git", "init", "-q", str(sub)], check=True, timeout=30)
    assert git_head.git_commit(sub) is None, "a repository made inside the work tree, without a commit yet"
    inner = commit()
    assert git_head.git_commit(sub) == inner != second
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    assert git_head.git_commit(sub) == second, "another environment is asked anew"
    git_head.forget()


def test_a_temporary_run_leaves_its_sample_tensors_live_and_says_so(tmp_path):
    """Copying the inputs off the device into samples.pt cost more than the rest of a small model's profile(): a
    temporary run, which nobody reads but the profiler, keeps them in function_data only; a run written to ``out``
    saves them."""
    from kernelscope.analyzer.errors import KernelscopeError
    from kernelscope.recorder.bench import bench

    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval()
    samples = [((torch.randn(2, 8),), {})]
    profiler = ModuleFunctionKernelProfiler()
    _, function_data = profiler.profile(model, samples, warmup_iterations=1)
    assert not (profiler.run_dir / "samples.pt").exists() and (profiler.run_dir / "samples.json").exists()
    saved = profiler.run.manifest["sample_tensors"]
    linear_inputs, relu_input = (2 * 8 + 8 * 8 + 8) * 4, 2 * 8 * 4  # x, weight, bias; the output of linear
    assert saved == {"saved": False, "bytes": linear_inputs + relu_input, "reason": run_writer.TEMPORARY_RUN_TENSORS}
    assert profiler.run.manifest["files"]["sample_tensors"] is None
    assert function_data["linear"][0][1][0][0] is samples[0][0][0], "the live input, not a copy"
    with pytest.raises(KernelscopeError, match=r"was not saved: a temporary run .*bench the profiler itself"):
        bench(profiler.run, device="cpu")
    assert len(bench(profiler, ["linear"], device="cpu", repeat=2, warmup=1)) == 1
    profiler.profile(model, samples, warmup_iterations=1, out=tmp_path / "run")
    assert (tmp_path / "run" / "samples.pt").exists() and profiler.run.manifest["sample_tensors"]["saved"]
    profiler.release()


def test_the_recorded_pass_keeps_dynamos_frame_callback_as_it_is(monkeypatch):
    """Under compiled_code_kept's stance (on in every recording once torch.profiler has imported dynamo) a call's
    keying runs with dynamo's frame callback off, for a compiled frame calling a patched function; a predicted call
    of the recorded pass runs the recorder's own code alone, and sets the callback for none of its calls (a lambda
    around every wrapper's sample recorder did, two C calls and two frames a call)."""
    from kernelscope.recorder import compiled
    from kernelscope.recorder.instrument import instrumented
    from kernelscope.recorder.profiler import record_pass
    from kernelscope.recorder.samples import SampleBook

    real, settings, counts = compiled._set_eval_frame, [], {}
    monkeypatch.setattr(compiled, "_set_eval_frame", lambda callback: settings.append(callback) or real(callback))
    model, x = nn.Sequential(nn.Linear(4, 4), nn.GELU()).eval(), torch.randn(2, 4)

    def counted(label):
        def one_pass():
            before = len(settings)
            model(x + 1)
            counts[label] = len(settings) - before

        return one_pass

    book = SampleBook()
    with torch.no_grad(), instrumented(list(model.named_modules()), book, None, "all"):
        assert compiled.STANCE_KEPT == [True], "the stance is on, as in profile()"
        _, keys, _ = record_pass(book, counted("keyed"), counted("recorded"), None, rehearsal=counted("rehearsal"))
    assert keys == "predicted"
    assert counts["keyed"] > 0, "the keyed warm-up's calls are keyed with the callback off"
    assert counts["rehearsal"] == counts["recorded"] == 0


def test_no_repository_is_known_until_one_appears_where_git_looks(tmp_path, monkeypatch):
    """A recording outside any repository (a job's scratch folder) asked git, in a subprocess, every time."""
    from kernelscope.recorder import git_head

    folder = tmp_path / "plain" / "deeper"
    folder.mkdir(parents=True)
    if any((up / name).exists() for up in folder.parents for name in (".git", "HEAD")):
        pytest.skip("the temporary folder is inside a repository")
    asked = []
    run = git_head.run
    monkeypatch.setattr(git_head, "run", lambda arguments, *rest: asked.append(arguments) or run(arguments, *rest))
    git_head.forget()
    assert git_head.git_commit(folder) is None and len(asked) == 1
    assert git_head.git_commit(folder) is None and len(asked) == 1, "known: git is not asked again"
    assert git_head.git_commit_in_background(folder).result(0) is None, "known: answered without a thread"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-C", str(folder.parent)]
    subprocess.run(["git", "init", "-q", str(folder.parent)], check=True, timeout=30)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True, timeout=30)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert git_head.git_commit(folder) == head and len(asked) == 2, "a repository made in a folder above"
    git_head.forget()
