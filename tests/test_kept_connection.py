"""A small run's connection kept for the next run (connection.py): its scope-name variables then cost the next run
of the same scheme no SET (eight SETs were ~1.2 ms of a small trace's load), what each run reads is the same as on a
new connection, a large run's or one handed to a user is not kept, a kept one holds no drops back for the next run,
and one handed to a user holds no temporary table of an earlier run."""

from __future__ import annotations

import pytest
from conftest import REPO, SHARED_TRACES
from kernelscope.analyzer import connection, load_run, rank_parts, run, sql

MLP = REPO / "sample_traces" / "mlp"
WITH_STACK = SHARED_TRACES[0].parent / "with_stack.json.gz"


def _loaded(path):
    """(the run's frame, its connection) of a load of ``path``, closed."""
    with load_run(path) as loaded:
        return loaded.profiling_df(), loaded._con


def test_a_small_run_leaves_its_connection_with_its_variables_to_the_next(monkeypatch):
    frame, con = _loaded(MLP)
    definitions = []
    real = sql._definitions
    monkeypatch.setattr(sql, "_definitions", type("Noted", (dict,), {"get": lambda d, k: definitions.append(k)})())
    again, kept = _loaded(MLP)
    assert kept is con and definitions in ([], [""]), "no variable set again"
    monkeypatch.setattr(sql, "_definitions", real)
    assert again.equals(frame)


@pytest.mark.parametrize("first", [WITH_STACK, MLP, REPO / "sample_traces" / "demo"])
def test_a_run_on_a_kept_connection_reads_what_it_reads_on_a_new_one(first):
    for path in (MLP, WITH_STACK, REPO / "sample_traces" / "demo"):
        connection._close_instances()  # a new instance and connection
        fresh, _ = _loaded(path)
        _loaded(first)
        after, _ = _loaded(path)
        assert after.equals(fresh), (first, path)


def test_a_kept_connection_makes_the_empty_frame_scopes_again_only_after_frames(monkeypatch):
    # frame_scopes.sql's empty table and view stand on a small run's kept connection (their DROPs held back), where
    # frames.sql (a plain trace's Python frames) did not replace them: making them again cost a load ~0.6 ms
    made = []
    real = rank_parts.run_sql_file
    monkeypatch.setattr(rank_parts, "run_sql_file", lambda con, name, **kw: made.append(name) or real(con, name, **kw))
    for path, makes in ((MLP, None), (MLP, False), (WITH_STACK, False), (MLP, True), (MLP, False)):
        made.clear()
        frame, _ = _loaded(path)
        if makes is not None:
            assert ("frame_scopes.sql" in made) is makes, path
    assert frame.equals(_loaded(MLP)[0])


def test_a_kept_runs_instance_is_given_back_with_no_question_and_serves_as_before(monkeypatch):
    # the run set its sized settings and made events and kernels, nothing else: asking DuckDB cost a small load ~0.5 ms
    _loaded(MLP)
    ran = []
    real = connection.execute
    monkeypatch.setattr(connection, "execute", lambda con, text, *a: ran.append(text) or real(con, text, *a))
    frame, con = _loaded(MLP)
    assert ran == ['DROP TABLE "events"', 'DROP TABLE "kernels"'], ran
    _, instance, _, now, kept = connection._idle  # waiting for the next run, as the give-back left it
    shown = instance.execute("SELECT current_setting('threads'), current_setting('disabled_optimizers')").fetchone()
    assert kept is con and now.threads == int(shown[0])
    assert set(now.disabled_optimizers.split(",")) == {name.strip() for name in shown[1].split(",")}
    assert instance.execute("SELECT count(*) FROM duckdb_tables() WHERE NOT temporary").fetchone() == (0,)
    assert _loaded(MLP)[0].equals(frame)


def test_a_large_run_and_a_shared_one_keep_no_connection(monkeypatch):
    _, con = _loaded(MLP)
    with load_run(MLP) as shared:
        assert shared._con is con
        shared.sql("SELECT 1")  # handed to the user's SQL
    _, fresh = _loaded(MLP)
    assert fresh is not con
    monkeypatch.setattr(run, "keeps_steps", lambda size: False)  # as a large trace
    _, large = _loaded(MLP)
    assert large is fresh
    _, after = _loaded(MLP)
    assert after is not large


def test_a_kept_connection_holds_no_drops_back_and_shows_a_user_no_earlier_table(monkeypatch):
    _, con = _loaded(WITH_STACK)  # frames.sql's tables, kept with its other step tables
    assert con not in sql._held, "the next run holds its own drops back, or none"
    monkeypatch.setattr(run, "keeps_steps", lambda size: False)
    with load_run(MLP) as large:
        assert large._con is con and con not in sql._held
    monkeypatch.undo()
    _, con = _loaded(WITH_STACK)
    with load_run(MLP) as shared:
        assert shared._con is con
        temporary = shared.sql("SELECT table_name FROM duckdb_tables() WHERE temporary")
        views = shared.sql("SELECT view_name FROM duckdb_views() WHERE temporary AND NOT internal")
        assert temporary.empty and views.empty, (temporary, views)


def test_a_failed_load_keeps_no_connection(tmp_path):
    _, con = _loaded(MLP)
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": -5, "pid": 0, '
                   '"tid": 7, "args": {"correlation": 1}}]}')  # fmt: skip
    with pytest.raises(Exception, match="bad.json"):
        load_run(bad)
    _, after = _loaded(MLP)
    assert after is not con
