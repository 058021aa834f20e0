"""A small run's statements run on fewer DuckDB threads than its instance's default, and the default comes back
for whatever uses the instance next: the next run, and a user's SQL on a run's connection."""

from __future__ import annotations

from conftest import REPO
from kernelscope.analyzer import connection, load_run
from kernelscope.analyzer import run as run_module
from kernelscope.analyzer.threads import THREAD_BYTES, run_threads

MLP = REPO / "sample_traces" / "mlp"


def _threads(con) -> int:
    return int(con.execute("SELECT current_setting('threads')").fetchone()[0])


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
    seen = []
    run_sql_file = run_module.run_sql_file

    def spy(con, name, **literals):
        if name == "attribution.sql":
            seen.append(_threads(con))
        return run_sql_file(con, name, **literals)

    monkeypatch.setattr(run_module, "run_sql_file", spy)
    run = load_run(MLP)
    instance = connection._leases[id(run._con)].instance
    run.close()
    assert seen == [1], "a trace of a few hundred KB is attributed on one thread"
    con = connection.connect()
    assert connection._leases[id(con)].instance is instance and _threads(con) == 4, "the next user has the default"
    connection.close(con)
    run = load_run(MLP)
    assert _threads(run.con) == 4, "a run's connection handed to a user has the default"
    run.close()
    assert seen == [1, 1]
    connection._close_instances()
