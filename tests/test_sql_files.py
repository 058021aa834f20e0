"""The SQL files run from statements parsed once per process: the same statements each time, in order, the last
one's result returned, and a file with ``${key}`` literals parsed once per set of values."""

from __future__ import annotations

import duckdb
import pytest
from conftest import REPO
from kernelscope.analyzer import load_run, rank_parts, sql


def test_a_file_is_parsed_once_and_runs_every_statement_in_order(monkeypatch, tmp_path):
    (tmp_path / "steps.sql").write_text(
        "CREATE TEMP TABLE t AS SELECT 1 AS x;\nINSERT INTO t VALUES (2);\nSELECT list(x ORDER BY x) FROM t;\n"
    )
    monkeypatch.setattr(sql, "sql_text", lambda name: (tmp_path / name).read_text())
    monkeypatch.setattr(sql, "_parsed", {})
    con = duckdb.connect()
    assert sql.run_sql_file(con, "steps.sql").fetchone()[0] == [1, 2], "the last statement's result"
    parsed = sql._parsed["steps.sql"]
    assert [s.query.split()[0] for s in parsed] == ["CREATE", "INSERT", "SELECT"]
    other = duckdb.connect()  # another instance runs the same parsed statements
    assert sql.run_sql_file(other, "steps.sql").fetchone()[0] == [1, 2]
    assert sql._parsed["steps.sql"] is parsed


def test_literals_are_substituted_and_parsed_once_per_set_of_values(monkeypatch, tmp_path):
    (tmp_path / "lit.sql").write_text("CREATE OR REPLACE TEMP TABLE lit AS SELECT ${value} AS v;\nSELECT v FROM lit;")
    monkeypatch.setattr(sql, "sql_text", lambda name: (tmp_path / name).read_text())
    monkeypatch.setattr(sql, "_parsed", {})
    monkeypatch.setattr(sql, "_filled", {})
    con = duckdb.connect()
    assert sql.run_sql_file(con, "lit.sql", value="a'b").fetchone()[0] == "a'b", "the last statement's result"
    assert sql.run_sql_file(con, "lit.sql", value="c").fetchone()[0] == "c"
    parsed = sql._filled[("lit.sql", (("value", "c"),))]
    assert sql.run_sql_file(con, "lit.sql", value="c").fetchone()[0] == "c"
    assert sql._filled[("lit.sql", (("value", "c"),))] is parsed and "lit.sql" not in sql._parsed
    monkeypatch.setattr(sql, "MAX_FILLED", 0)  # a process filling ever new values keeps none of them
    assert sql.run_sql_file(con, "lit.sql", value="d").fetchone()[0] == "d"
    assert len(sql._filled) == 2


@pytest.mark.parametrize("name", ["attribution.sql", "frames_needed.sql", "connection.sql"])
def test_a_load_runs_the_files_from_their_parsed_statements(name):
    load_run(REPO / "sample_traces" / "mlp").close()
    parsed = sql._parsed[name]
    load_run(REPO / "sample_traces" / "demo").close()
    assert sql._parsed[name] is parsed


def _only_file(monkeypatch, tmp_path, name: str, text: str) -> None:
    """``name`` holding ``text`` the one SQL file, nothing of it parsed yet."""
    (tmp_path / name).write_text(text)
    monkeypatch.setattr(sql, "sql_text", lambda name: (tmp_path / name).read_text())
    for cache in ("_parsed", "_guards", "_later_guards", "_together", "_settled"):
        monkeypatch.setattr(sql, cache, {})


def test_a_guarded_statement_runs_only_where_its_expression_is_true(monkeypatch, tmp_path):
    text = (
        "CREATE TEMP TABLE t AS SELECT 1 AS x;\n"
        "-- a step for some inputs only\n-- run if: EXISTS (SELECT 1 FROM t WHERE x > 1)\nINSERT INTO t VALUES (10);\n"
        "-- run if: (SELECT count(*) FROM t) = 1\nINSERT INTO t VALUES (2);\n"
        "INSERT INTO t SELECT 3 -- run if: false (not a leading comment: no guard)\n;\n"
        "SELECT list(x ORDER BY x) FROM t;\n"
    )
    _only_file(monkeypatch, tmp_path, "guarded.sql", text)
    assert sql.run_sql_file(duckdb.connect(), "guarded.sql").fetchone()[0] == [1, 2, 3]
    guards = [None, "EXISTS (SELECT 1 FROM t WHERE x > 1)", "(SELECT count(*) FROM t) = 1", None, None]
    assert sql._guards["guarded.sql"] == guards


def test_guards_of_variables_alone_are_asked_together_until_a_statement_sets_one(monkeypatch, tmp_path):
    (tmp_path / "variables.sql").write_text(
        "CREATE TEMP TABLE t (x INTEGER);\nSET VARIABLE v = 1;\n"
        "-- run if: getvariable('v') = 1\nINSERT INTO t VALUES (1);\n"
        "-- run if: getvariable('n')\nINSERT INTO t VALUES (90);\n"  # NULL: neither this nor its negation runs
        "-- run if: NOT getvariable('n')\nINSERT INTO t VALUES (91);\n"
        "SET VARIABLE v = 2;\n"
        "-- run if: getvariable('v') = 2\nINSERT INTO t VALUES (2);\n"  # asked again: v was set since the first
        "-- run if: (SELECT count(*) FROM t) = 2\nINSERT INTO t VALUES (3);\n"  # a table's: asked at its turn
        "SET VARIABLE n = false;\n"
        "-- run if: NOT getvariable('n')\nINSERT INTO t VALUES (92);\n"
        "RESET VARIABLE v;\n"  # names no variable SET VARIABLE sets: any guard after it is asked again
        "-- run if: getvariable('v') IS NULL\nINSERT INTO t VALUES (4);\n"
        "SELECT list(x ORDER BY x) FROM t;\n"
    )
    monkeypatch.setattr(sql, "sql_text", lambda name: (tmp_path / name).read_text())
    for cache in ("_parsed", "_guards", "_together"):
        monkeypatch.setattr(sql, cache, {})
    asked = []
    real_question = sql._question
    monkeypatch.setattr(sql, "_question", lambda con, guards: asked.append(guards) or real_question(con, guards))
    assert sql.run_sql_file(duckdb.connect(), "variables.sql").fetchone()[0] == [1, 2, 3, 4, 92]
    n = "getvariable('n')"
    counted = "(SELECT count(*) FROM t) = 2"
    together = ("getvariable('v') = 1", n, f"NOT {n}")
    assert asked == [together, ("getvariable('v') = 2",), (counted,), (f"NOT {n}",), ("getvariable('v') IS NULL",)]


@pytest.mark.parametrize(
    ("name", "of_variables", "questions"),
    [("attribution.sql", 6, [1] * 7 + [6]), ("held_by_sql.sql", 2, [1, 2]), ("attribution_rows.sql", 1, [1, 1, 1])],
)
def test_attributions_guards_of_one_variable_are_one_question(name, of_variables, questions):
    con = duckdb.connect()
    guards = sql._statement_guards(con, name)
    read = [sql.variables_read(guard) for guard in guards if guard is not None]
    assert sum(names is not None for names in read) == of_variables
    asked = [positions for positions in sql._guards_together(con, name) if positions is not None]
    # the guards of the launch steps, points and rows are answered by the load (rank_parts.DEVICE_WORK), each alone
    assert sorted(map(len, asked)) == questions, "each variable's guards in one SELECT, each table's alone"
    launch_steps = guards.count(rank_parts.DEVICE_WORK) + guards.count(f"NOT {rank_parts.DEVICE_WORK}")
    assert launch_steps == {"attribution.sql": 7, "attribution_rows.sql": 2}.get(name, 0)


def test_a_guards_answer_is_handed_on_only_where_no_later_statement_can_change_it(monkeypatch, tmp_path):
    text = (
        "SET VARIABLE v = 1;\n"
        "CREATE TEMP TABLE t AS SELECT 1 AS x;\n"
        "-- run if: getvariable('v') = 1\nINSERT INTO t VALUES (2);\n"
        "-- run if: getvariable('w') IS NULL\nSET VARIABLE w = 5;\n"
        "-- run if: (SELECT count(*) FROM t) = 2\nINSERT INTO t VALUES (3);\n"
        "-- run if: getvariable('u') IS NULL\nINSERT INTO t VALUES (4);\n"
        "SELECT list(x ORDER BY x) FROM t;\n"
    )
    _only_file(monkeypatch, tmp_path, "answered.sql", text)
    answered = {}
    known = {"getvariable('u') IS NULL": True}
    ran = sql.run_sql_file(duckdb.connect(), "answered.sql", known=known, answered=answered).fetchone()[0]
    assert ran == [1, 2, 3, 4]
    # w is set by its own statement, t is no variable, and u's answer was the caller's
    assert answered == {"getvariable('v') = 1": True}


def test_guards_the_caller_knows_are_not_asked(monkeypatch, tmp_path):
    text = (
        "CREATE TEMP TABLE t AS SELECT 1 AS x;\n"
        "-- run if: getvariable('v') = 1\nINSERT INTO t VALUES (2);\n"
        "-- run if: getvariable('v') = 2\nINSERT INTO t VALUES (3);\n"
        "-- run if: getvariable('v') = 1\n-- run if: no_such_table_is_read()\nINSERT INTO t VALUES (4);\n"
        "SELECT list(x ORDER BY x) FROM t;\n"
    )
    _only_file(monkeypatch, tmp_path, "known.sql", text)
    asked = []
    real_question = sql._question
    monkeypatch.setattr(sql, "_question", lambda con, guards: asked.append(guards) or real_question(con, guards))
    known = {"getvariable('v') = 1": True, "no_such_table_is_read()": False}
    assert sql.run_sql_file(duckdb.connect(), "known.sql", known=known).fetchone()[0] == [1, 2]
    assert asked == [("getvariable('v') = 2",)], "the one guard not known, asked alone"


def test_no_file_with_literals_and_no_last_statement_is_guarded():
    folder = REPO / "analyzer"
    for path in [*folder.glob("*.sql"), *folder.glob("report/*.sql")]:
        text = path.read_text()
        statements = duckdb.connect().extract_statements(text) if "${" not in text else []
        assert "${" not in text or "-- run if:" not in text, path.name
        if statements:
            assert sql.statement_guard(statements[-1]) is None, path.name


def test_the_files_a_load_runs_are_parsed_where_its_instance_is_made_ahead(monkeypatch):
    # the files a load runs without literals are those the instance made on a thread parses (connection.LOADS_RUN)
    from kernelscope.analyzer import connection, rank_parts, validate
    from kernelscope.analyzer import ingest as ingest_module

    ran = []

    def noted(con, name, **literals):
        if not literals:
            ran.append(name)
        return sql.run_sql_file(con, name, **literals)

    for module in (connection, ingest_module, rank_parts, validate):
        monkeypatch.setattr(module, "run_sql_file", noted)
    for trace in ("mlp", "threads"):
        load_run(REPO / "sample_traces" / trace).close()
    assert ran and set(ran) <= set(connection.LOADS_RUN)
    connection._close_instances()
    monkeypatch.setattr(sql, "_parsed", {})
    monkeypatch.setattr(sql, "_guards", {})
    monkeypatch.setattr(sql, "_together", {})
    monkeypatch.setattr(sql, "_questions", {})
    connection.prepare().result()
    assert set(sql._parsed) == set(connection.LOADS_RUN)
    questions = {
        tuple(sql._guards[name][p] for p in positions)
        for name in connection.LOADS_RUN
        for positions in sql._together[name]
        if positions is not None
    }
    assert questions and set(sql._questions) == questions


def test_the_package_starts_making_its_instance_as_it_imports():
    import subprocess
    import sys

    script = "import kernelscope.analyzer.connection as c; import sys; print(c._making is not None)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "True"


def test_a_statement_with_several_guards_runs_where_all_hold_each_asked_after_those_above_it(monkeypatch, tmp_path):
    # the second guard reads a table that only a true first guard's statements made: asked after it, never before
    text = (
        "SET VARIABLE made = false;\n"
        "-- run if: getvariable('made')\nCREATE TEMP TABLE m AS SELECT 1 AS x;\n"
        "CREATE TEMP TABLE t AS SELECT 1 AS x;\n"
        "-- run if: getvariable('made')\n-- run if: EXISTS (SELECT 1 FROM m)\nINSERT INTO t VALUES (10);\n"
        "-- run if: NOT getvariable('made')\n-- run if: (SELECT count(*) FROM t) = 1\nINSERT INTO t VALUES (2);\n"
        "-- run if: NOT getvariable('made')\n-- run if: (SELECT count(*) FROM t) = 1\nINSERT INTO t VALUES (3);\n"
        "SELECT list(x ORDER BY x) FROM t;\n"
    )
    _only_file(monkeypatch, tmp_path, "both.sql", text)
    assert sql.run_sql_file(duckdb.connect(), "both.sql").fetchone()[0] == [1, 2]
    statements = sql._parsed["both.sql"]
    assert sql.statement_guards(statements[3]) == ("getvariable('made')", "EXISTS (SELECT 1 FROM m)")
    assert sql.statement_guard(statements[3]) == "getvariable('made')"
    # a file's first statement: its leading comment holds the file's head, a blank line, then the step's own
    (first,) = duckdb.connect().extract_statements("-- head.sql: what it makes\n\n-- run if: false\nSELECT 1;")
    assert sql.statement_guards(first) == ("false",)
