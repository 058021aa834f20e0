"""A small run's statements run on fewer DuckDB threads than its instance's default and are planned with fewer
optimizer passes, the same results either way, and the defaults come back for whatever uses the instance next: the
next run, and a user's SQL on a run's connection (a file database's too)."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import REPO
from kernelscope.analyzer import connection, load_run, rank_parts, run_settings
from kernelscope.analyzer.memory import MIN_DISK_LIMIT, MIN_LIMIT
from kernelscope.analyzer.run import Run
from kernelscope.analyzer.run_settings import LEAN_PASSES, THREAD_BYTES, run_threads

MLP = REPO / "sample_traces" / "mlp"


def _threads(con) -> int:
    return int(con.execute("SELECT current_setting('threads')").fetchone()[0])


def _disabled(con) -> set[str]:
    return set(filter(None, con.execute("SELECT current_setting('disabled_optimizers')").fetchone()[0].split(",")))


def _settings_at_attribution(monkeypatch) -> list[tuple[int, set[str]]]:
    """(threads, disabled optimizer passes) of each attribution.sql that runs from now on."""
    seen = []
    run_sql_file = rank_parts.run_sql_file

    def spy(con, name, **literals):
        if name == "attribution.sql":
            seen.append((_threads(con), _disabled(con)))
        return run_sql_file(con, name, **literals)

    monkeypatch.setattr(rank_parts, "run_sql_file", spy)
    return seen


def test_threads_grow_with_the_trace_up_to_the_default():
    assert run_threads(0, 16) == 1 and run_threads(THREAD_BYTES - 1, 16) == 1
    assert run_threads(3 * THREAD_BYTES, 16) == 3
    assert run_threads(100 * THREAD_BYTES, 16) == 16 and run_threads(100 * THREAD_BYTES, 1) == 1


def test_a_small_run_runs_on_one_thread_and_gives_the_default_back(monkeypatch):
    made = connection._made

    def four_threads(database):  # an instance whose default is 4 threads, whatever this machine's cores
        con = made(database)
        con.execute("SET threads = 4")
        return con

    connection._close_instances()
    monkeypatch.setattr(connection, "_made", four_threads)
    seen = _settings_at_attribution(monkeypatch)
    run = load_run(MLP)
    instance = connection._leases[id(run._con)].instance
    run.close()
    assert [threads for threads, _ in seen] == [1], "a trace of a few hundred KB is attributed on one thread"
    con = connection.connect()
    assert connection._leases[id(con)].instance is instance and _threads(con) == 4, "the next user has the default"
    connection.close(con)
    run = load_run(MLP)
    assert _threads(run.con) == 4, "a run's connection handed to a user has the default"
    run.close()
    assert [threads for threads, _ in seen] == [1, 1]
    connection._close_instances()


def test_a_small_run_is_planned_with_the_lean_passes_and_gives_all_back(monkeypatch):
    connection._close_instances()
    seen = _settings_at_attribution(monkeypatch)
    run = load_run(MLP)
    instance = connection._leases[id(run._con)].instance
    every_pass = {name for (name,) in run._con.execute("SELECT name FROM duckdb_optimizers()").fetchall()}
    run.close()
    assert seen[0][1] == every_pass - LEAN_PASSES and "cte_inlining" not in seen[0][1], "CTE inlining alone"
    con = connection.connect()
    assert connection._leases[id(con)].instance is instance and not _disabled(con), "the next user has every pass"
    connection.close(con)
    run = load_run(MLP)
    assert not _disabled(run.con), "a run's connection handed to a user has every pass"
    run.close()
    assert seen[1][1] == seen[0][1]
    connection._close_instances()


def test_an_instance_keeps_a_runs_settings_for_the_next_run_alone(monkeypatch):
    """Setting them back at give-back and again at the next small run's start cost ~0.6 ms a load, and setting
    memory_limit has DuckDB give its freed memory back to the system (benchmarks/RESULTS.md): the next run sets only
    what differs, whatever it needs, and any other connection gets the defaults."""
    connection._close_instances()
    seen = _settings_at_attribution(monkeypatch)
    load_run(MLP).close()
    instance, made, left = connection._idle[1:4]
    assert left.threads == 1 and set(left.disabled_optimizers.split(",")) == seen[0][1], "as the small run had them"
    assert (left.memory_limit, left.disk_limit) == (f"{MIN_LIMIT}B", f"{MIN_DISK_LIMIT}B")
    load_run(MLP).close()
    monkeypatch.setattr(run_settings, "LEAN_BYTES", 1)  # a run planned with every pass after one with the lean ones
    load_run(MLP, memory_limit="64MB").close()
    assert [disabled for _, disabled in seen] == [seen[0][1], seen[0][1], set()] and seen[0][1]
    left = connection._idle[3]
    assert connection._idle[1] is instance and (left.threads, left.disabled_optimizers) == (1, "")
    monkeypatch.setattr(run_settings, "LEAN_BYTES", 2 << 20)
    with load_run(MLP) as run:  # on the same instance, which its user's SQL then keeps from the next
        assert run.con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == "512.0 MiB"
    load_run(MLP).close()
    instance = connection._idle[1]
    con = connection.connect()
    assert connection._leases[id(con)].instance is instance
    assert (_threads(con), _disabled(con)) == (made.threads, set()), "any other connection has the defaults"
    assert connection.sized_settings(con).memory_limit is None, "and sets its own memory limit"
    connection.close(con)
    connection._close_instances()


def test_a_run_from_lean_bytes_up_is_planned_with_every_pass(monkeypatch):
    monkeypatch.setattr(run_settings, "LEAN_BYTES", 1)
    seen = _settings_at_attribution(monkeypatch)
    load_run(MLP).close()
    assert seen[0][1] == set()


@pytest.mark.parametrize(
    "trace",
    [
        "mlp",
        "compiled_cnn",
        "cuda_graph",
        "threads",
        "rnn",
        "plain_kineto/with_stack.json.gz",
        "plain_kineto/misc.json.gz",
        "external/tl_mi300_bert_small.json.gz",
    ],
)
def test_the_lean_plan_attributes_as_every_pass_does(monkeypatch, trace):
    def kernels() -> pd.DataFrame:
        run = load_run(REPO / "sample_traces" / trace)
        try:
            return run._con.execute("SELECT * FROM kernels ORDER BY event_id").df()
        finally:
            run.close()

    lean = kernels()
    monkeypatch.setattr(run_settings, "LEAN_BYTES", 0)
    pd.testing.assert_frame_equal(lean, kernels())
    assert len(lean) > 0


def test_a_file_database_hands_its_user_the_defaults(tmp_path):
    run = Run(MLP, database=str(tmp_path / "run.duckdb"))
    lease = connection._leases[id(run._con)]
    assert _disabled(run._con) and _threads(run._con) == 1, "loaded as a small run"
    assert not _disabled(run.con) and _threads(run.con) == lease.fresh.threads, "handed over with the defaults"
    assert run.con.execute("SELECT count(*) FROM kernels").fetchone()[0] > 0
    run.close()
    assert lease.instance is not None and not lease.reusable
