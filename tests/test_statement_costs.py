"""What a load of a small run spends on DuckDB statements, which fix its fixed cost: a load that follows another of
the same run gives DuckDB no SQL text to parse (every statement it runs was parsed before), and its results are the
same as the first load's."""

from __future__ import annotations

import duckdb
import pytest

torch = pytest.importorskip("torch")

from kernelscope.analyzer import held, load_run  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)).eval()
    out = tmp_path_factory.mktemp("statements") / "run"
    profiler = ModuleFunctionKernelProfiler()
    profiler.profile(model, [((torch.randn(2, 8),), {})], warmup_iterations=1, out=out)
    profiler.release()
    return out


def _texts_given(monkeypatch) -> list[str]:
    """The SQL texts given to any DuckDB connection's execute() or sql() from now on (a parsed statement is none)."""
    given: list[str] = []
    for method in ("execute", "sql"):
        original = getattr(duckdb.DuckDBPyConnection, method)

        def watched(con, query, *args, _original=original, **kwargs):
            if isinstance(query, str):
                given.append(query)
            return _original(con, query, *args, **kwargs)

        monkeypatch.setattr(duckdb.DuckDBPyConnection, method, watched)
    return given


def test_a_load_like_the_last_parses_no_sql_text(small_run, monkeypatch):
    with load_run(small_run) as run:
        first = run.profiling_df()
    # the native sweep's table is read by a local name, which DuckDB finds in the frame that calls execute: the
    # watcher's own, here (held_by_sql.sql gives the same table, tests/test_held.py)
    monkeypatch.setattr(held, "native_sweep", None)
    with load_run(small_run) as run:
        assert run.profiling_df().equals(first)
    given = _texts_given(monkeypatch)
    with load_run(small_run) as run:
        again = run.profiling_df()
        assert run.manifest["annotation"].get("name_escape"), "a recording whose scopes' escapes are checked"
    assert given == [], "\n".join(given)
    assert again.equals(first)


def test_ks_rows_keeps_only_columns_a_later_statement_reads(small_run):
    # every statement after it scans each of its columns on a small trace (the lean plan prunes none)
    import re

    from kernelscope.analyzer.sql import sql_text

    rows_file = sql_text("attribution_rows.sql")
    after = rows_file[rows_file.index("DROP TABLE IF EXISTS ks_items") :] + sql_text("torchscript_modules.sql")
    with load_run(small_run) as run:
        columns = [name for (name,) in run._con.execute("SELECT column_name FROM (DESCRIBE ks_rows)").fetchall()]
    unread = [column for column in columns if not re.search(rf"\b{column}\b", after)]
    assert columns and unread == []


def test_scope_variables_are_set_only_where_the_connection_holds_other_values(monkeypatch):
    from kernelscope.analyzer.sql import define_scope_names

    con = duckdb.connect()
    ran = []
    original = duckdb.DuckDBPyConnection.execute
    monkeypatch.setattr(duckdb.DuckDBPyConnection, "execute", lambda c, q, *a: ran.append(q) or original(c, q, *a))
    define_scope_names(con, "ks.module:", "ks.fn:", "replay", None, names_escaped=False, macros=False)
    # a new connection holds no variable: those the run wants NULL (or empty) need no statement
    assert len(ran) == 6
    ran.clear()
    define_scope_names(con, "ks.module:", "ks.fn:", "replay", None, names_escaped=False, macros=False)
    assert ran == [], "the next rank's, the same, are already there"
    define_scope_names(con, "m:", "ks.fn:", None, "compiled", torchscript_paths=[("a", "b", "c")], macros=False)
    assert len(ran) == 4
    assert con.execute(
        "SELECT getvariable('module_prefix'), getvariable('graph_replay_call'), getvariable('compiled_region_call'), "
        "getvariable('torchscript_paths'), getvariable('names_escaped')"
    ).fetchone() == ("m:", None, "compiled", [{"scope": "a", "path": "b", "module": "c"}], False)
    ran.clear()
    define_scope_names(con, "m:", "ks.fn:", None, "compiled", macros=False)
    assert len(ran) == 1 and con.execute("SELECT getvariable('torchscript_paths')").fetchone() == ([],)


def test_a_small_runs_spans_are_bound_once_and_read_as_a_large_runs(small_run, monkeypatch):
    # a relation over held_spans.sql binds it for its schema, then again to run it: ~1 ms of a small trace's load
    related = []
    original = duckdb.DuckDBPyConnection.sql
    monkeypatch.setattr(
        duckdb.DuckDBPyConnection, "sql", lambda c, q, *a, **k: related.append(q) or original(c, q, *a, **k)
    )
    with load_run(small_run) as run:
        assert related == []
        held_of = {}
        for small in (True, False):  # the step tables a small run keeps to its end are there: the sweep runs again
            held.hold_spans(run._con, small=small)
            held_of[small] = run._con.execute("SELECT * FROM ks_held ORDER BY anchor").fetchall()
    assert held_of[True] and held_of[True] == held_of[False]


def test_the_name_lookup_gathers_its_ids_with_no_aggregate(small_run):
    # each aggregate is an operator whose setup a small trace pays whatever its rows; the IN needs no distinct ids
    from kernelscope.analyzer.sql import parsed_statements

    with load_run(small_run) as run:
        con = run._con
        (names,) = [s for s in parsed_statements(con, "attribution_rows.sql") if "TABLE ks_names AS" in s.query]
        plan = "\n".join(row[1] for row in con.execute("EXPLAIN " + names.query.split(" AS\n", 1)[1]).fetchall())
    shown = plan.lower()
    assert "union" in shown and "group by" not in shown and "aggregate" not in shown, plan


def _cpu_load_statements(small_run, monkeypatch) -> list[str]:
    """The statements of a load of the CPU recording ``small_run`` that follows another (on the connection it kept),
    their comments left out, upper-cased."""
    ran: list[str] = []
    original = duckdb.DuckDBPyConnection.execute

    def watched(con, query, *args, **kwargs):
        text = query if isinstance(query, str) else query.query
        ran.append("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).upper())
        return original(con, query, *args, **kwargs)

    monkeypatch.setattr(held, "native_sweep", None)  # its table is read by a local name, the watcher's frame's here
    load_run(small_run).close()
    monkeypatch.setattr(duckdb.DuckDBPyConnection, "execute", watched)
    with load_run(small_run) as run:
        assert run.device == "cpu"
        assert (run.profiling_df()["kernel_us"] >= 0).all()
    return ran


def _cpu_load_statement(small_run, monkeypatch, table: str) -> str:
    """The statement that made ``table`` in a load of the CPU recording ``small_run``, its comments left out."""
    (made,) = [query for query in _cpu_load_statements(small_run, monkeypatch) if f"TABLE {table.upper()} AS" in query]
    return made


def test_a_trace_without_device_work_makes_its_points_with_no_aggregate(small_run, monkeypatch):
    # the points of launches are an aggregate over the device items, of which such a trace has none
    anchors = _cpu_load_statement(small_run, monkeypatch, "ks_anchors")
    assert "GROUP BY" not in anchors, anchors


def test_a_trace_without_device_work_joins_its_rows_to_their_holders_alone(small_run, monkeypatch):
    # its items are CPU operators, each its own operator and point (made as ks_anchors, which it reads as its items):
    # no External id or point to look up; the second join to ks_held is the sum of each row's children (its self
    # time, for which `kernels` is then not updated)
    rows = _cpu_load_statement(small_run, monkeypatch, "ks_rows")
    assert rows.count("JOIN") == 3 and rows.count("KS_HELD") == 2, rows
    assert rows.count("FROM KS_ANCHORS") == 2 and "JOIN KS_ANCHORS" not in rows, rows
    assert "KS_OPS_BY_ID" not in rows and "KS_ITEMS" not in rows, rows


def test_a_trace_without_device_work_runs_no_statement_its_cpu_rows_do_not_need(small_run, monkeypatch):
    # each statement costs a small trace's load a fixed part of a millisecond: its CPU rows are made at once (no
    # empty table filled after), their self time with ks_rows (no UPDATE of `kernels`), no empty ks_ops_by_id that
    # nothing reads, no launch check of zeros set (the load knows it); its one part inserts in its own transaction; a
    # kept connection's ks_spans, ks_frame_scopes and ks_scope_names are not made again; its items are its points
    # (ks_anchors), not a table of their own
    ran = _cpu_load_statements(small_run, monkeypatch)
    unneeded = (
        "UPDATE ",
        "INSERT INTO KS_ITEMS",
        "KS_OPS_BY_ID",
        "SET VARIABLE KS_LAUNCH_CHECK",
        "BEGIN TRANSACTION",
        "COMMIT",
        "REPLACE TEMP VIEW KS_SPANS",
        "TEMP TABLE KS_ITEMS AS",
        "TEMP TABLE KS_FRAME_SCOPES",
        "TEMP VIEW KS_SCOPE_NAMES",
    )
    assert [text for text in ran if any(word in text for word in unneeded)] == []
    assert any("CREATE TEMP VIEW IF NOT EXISTS KS_SPANS" in text for text in ran)


def test_a_load_after_one_with_the_same_limits_has_its_settings_with_no_query(small_run, monkeypatch):
    # the ingest plans its parts by the connection's threads and limits, which the load has just set: asked of DuckDB
    # (for its display of the limits) once per pair of limits, as a SELECT cost a small trace's load ~0.6 ms
    from kernelscope.analyzer import ingest, memory, rank_parts

    load_run(small_run).close()
    real_read, real_ingest = memory.read_settings, rank_parts.ingest_trace
    handed, read = [], []

    def noting(con, path, **kwargs):
        handed.append((kwargs["settings"], real_read(con)))
        return real_ingest(con, path, **kwargs)

    monkeypatch.setattr(rank_parts, "ingest_trace", noting)
    for module in (memory, ingest):
        monkeypatch.setattr(module, "read_settings", lambda con: read.append(con) or real_read(con))
    with load_run(small_run) as run:
        assert run.device == "cpu"
    ((given, as_read),) = handed
    assert read == [] and given == as_read
