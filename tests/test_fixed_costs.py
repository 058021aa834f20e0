"""What profile() caches or skips to keep its fixed cost small gives the results it would give without: the torch
call targets follow the namespaces, temporary runs alone skip the flush, the prepared connection is a full one."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelscope.analyzer import connection  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler, calls, run_writer  # noqa: E402
from torch import nn  # noqa: E402


def test_torch_call_targets_follow_a_rebound_namespace(monkeypatch):
    assert (torch, "addmm", "torch.addmm") in calls.torch_call_targets()  # chosen, and now cached
    monkeypatch.setattr(torch, "addmm", lambda *args, **kwargs: None)  # no longer torch's operator
    monkeypatch.setattr(torch.Tensor, "kernelscope_test_method", lambda self: self, raising=False)
    if torch.distributed.is_available():
        assert (torch.distributed, "all_reduce", "torch.distributed.all_reduce") in calls.torch_call_targets()
        monkeypatch.setattr(torch.distributed, "all_reduce", len)  # not a Python function: not a collective to patch
    targets = calls.torch_call_targets()
    assert (torch.distributed, "all_reduce", "torch.distributed.all_reduce") not in targets
    assert (torch, "addmm", "torch.addmm") not in targets
    assert (torch.Tensor, "kernelscope_test_method", "Tensor.kernelscope_test_method") in targets
    assert targets == calls._choose_targets()


def test_only_runs_written_to_out_are_flushed(tmp_path, monkeypatch):
    flushed = []
    monkeypatch.setattr(run_writer, "_sync", flushed.append)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval()
    samples = [((torch.randn(2, 8),), {})]
    profiler = ModuleFunctionKernelProfiler()
    profiler.profile(model, samples, warmup_iterations=1)
    assert flushed == [], "a temporary run is removed with its profiler: nothing to flush"
    assert not profiler.run._views_defined, "profile()'s own frames need no view"
    assert profiler.run.sql("SELECT count(*) AS n FROM summary")["n"][0] > 0  # defined at first use
    profiler.profile(model, samples, warmup_iterations=1, out=tmp_path / "run")
    assert len(flushed) == 1 and flushed[0].name.endswith(".partial")
    assert profiler.run.manifest["git_commit"] is None or len(profiler.run.manifest["git_commit"]) in (40, 64)
    profiler.release()


def _instance(con):
    """The database instance a leased connection is on."""
    return connection._leases[id(con)].instance


def _macros_work(con) -> bool:
    con.execute("SET VARIABLE ks_key_bits = {t: 10::UTINYINT, d: 10::UTINYINT, i: 10::UTINYINT, t0: 0::BIGINT}")
    key = (5 << 20) | ((2**10 - 1 - 4) << 10) | 3  # start 5, 4 ns long, event 3
    con.execute("SET VARIABLE ks_packed = true")
    return con.execute("SELECT ks_span_order(5, 9, 3)").fetchone()[0] == {"s": key, "e": 0, "id": 3}


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
