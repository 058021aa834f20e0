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


def test_a_prepared_connection_is_taken_once_and_has_the_macros(monkeypatch):
    prepared = connection.prepare().result()
    first, second = connection.connect(), connection.connect()
    assert first is prepared and second is not prepared
    for con in (first, second):
        con.execute("SET VARIABLE ks_key_bits = {t: 10::UTINYINT, d: 10::UTINYINT, i: 10::UTINYINT, t0: 0::BIGINT}")
        assert con.execute("SELECT ks_span_of_key(ks_span_key(5, 9, 3))").fetchone()[0] == {"s": 5, "e": -9, "id": 3}
        con.close()
    made = connection._made

    def fails_once(database):
        monkeypatch.setattr(connection, "_made", made)
        raise connection.duckdb.IOException("made on the thread: fails")

    monkeypatch.setattr(connection, "_made", fails_once)
    connection.prepare().exception()
    con = connection.connect()  # the failure on the thread is not the caller's: it makes one there and then
    assert con.execute("SELECT 1").fetchone() == (1,)
    con.close()
