"""What the native reader tells of a trace as it reads it (_kineto.c, part_facts; trace_header.py): whether it holds
device work, Python frames, a name with '%', and a launch of another runtime than CUDA's. A load asks the questions
it answers of table ``events`` only where the reader did not read every part: frames_needed.sql's SELECT,
validate_escapes' query of the scope names, and attribution.sql's guard of two runtimes sharing a correlation. The
facts are checked against the SQL that asks the same on every sample and shared trace."""

from __future__ import annotations

import json

import duckdb
import pytest
from conftest import REPO, SHARED_TRACES
from kernelscope.analyzer import connection, load_run, rank_parts, sql
from kernelscope.analyzer.ingest import ingest_trace
from kernelscope.analyzer.trace_header import DEVICE_WORK, OTHER_RUNTIME, PERCENT_NAME, PYTHON_FRAMES

TRACES = sorted(
    [
        *(REPO / "sample_traces").glob("*/trace.json.gz"),
        *SHARED_TRACES,
        *(p for p in (REPO / "sample_traces" / "external").iterdir() if p.name.endswith((".json", ".json.gz"))),
    ]
)
# the SQL of each fact, over table events as ingest made it
ASKED = {
    DEVICE_WORK: "EXISTS (SELECT 1 FROM events WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') "
    "OR ks_launch_category(cat))",
    PYTHON_FRAMES: "EXISTS (SELECT 1 FROM events WHERE cat = 'python_function')",
    PERCENT_NAME: "EXISTS (SELECT 1 FROM events WHERE contains(name, '%'))",
    OTHER_RUNTIME: "EXISTS (SELECT 1 FROM events WHERE ks_launch_category(cat) AND ks_launch_family(cat) <> 'cuda')",
}


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_the_facts_are_what_the_sql_finds(trace):
    con = connection.connect()
    try:
        header = ingest_trace(con, trace)
        if header.facts is None:
            pytest.skip("a part the native reader left to DuckDB's: the load asks the questions")
        for fact, question in ASKED.items():
            assert bool(header.facts & fact) == con.execute(f"SELECT {question}").fetchone()[0], (fact, trace)
    finally:
        connection.close(con)


def test_the_facts_of_a_part_with_each(tmp_path):
    events = [
        '{"ph": "X", "cat": "python_function", "name": "f", "ts": 1, "dur": 1, "pid": 1, "tid": 1}',
        '{"ph": "X", "cat": "cpu_op", "name": "ks.fn:a%25b#0", "ts": 1, "dur": 1, "pid": 1, "tid": 1}',
        '{"ph": "i", "cat": "xpu_driver", "name": "zeLaunch", "ts": 1, "pid": 1, "tid": 1}',
    ]
    everything = DEVICE_WORK | PYTHON_FRAMES | PERCENT_NAME | OTHER_RUNTIME
    for kept, facts in ((0, PYTHON_FRAMES), (1, PERCENT_NAME), (2, DEVICE_WORK | OTHER_RUNTIME), (3, everything)):
        text = events[:kept] if kept == 3 else [events[kept]]
        (tmp_path / "t.json").write_text('{"traceEvents": [' + ", ".join(text) + "]}")
        con = duckdb.connect()
        sql.run_sql_file(con, "events.sql")
        header = ingest_trace(con, tmp_path / "t.json")
        assert header.facts == facts
    for category, facts in (("cuda_runtime", DEVICE_WORK), ("cuda_driver", DEVICE_WORK), ("kernel", DEVICE_WORK),
                            ("runtime", DEVICE_WORK | OTHER_RUNTIME)):  # fmt: skip
        event = {"ph": "X", "cat": category, "name": "cudaLaunchKernel", "ts": 1, "dur": 1, "pid": 1, "tid": 1}
        (tmp_path / "t.json").write_text(json.dumps({"traceEvents": [event]}))
        con = duckdb.connect()
        sql.run_sql_file(con, "events.sql")
        assert ingest_trace(con, tmp_path / "t.json").facts == facts, category


def _asked(monkeypatch) -> list[str]:
    """The names of the questions a load asks of its events from now on: frames_needed.sql, validate_escapes."""
    asked = []
    run_file, escapes = rank_parts.run_sql_file, rank_parts.validate_escapes

    def noting(con, name, **kwargs):
        asked.append(name)
        return run_file(con, name, **kwargs)

    monkeypatch.setattr(rank_parts, "run_sql_file", noting)
    monkeypatch.setattr(rank_parts, "validate_escapes", lambda *a: asked.append("validate_escapes") or escapes(*a))
    return asked


def test_a_recording_asks_neither_question(monkeypatch):
    # its names escaped (name_escape), none with '%'; no Python frame: each question cost a small trace's load ~0.5 ms
    asked = _asked(monkeypatch)
    with load_run(REPO / "sample_traces" / "mlp") as run:
        assert run.launch_check().device_events > 0
    assert "frames_needed.sql" not in asked and "validate_escapes" not in asked
    assert "attribution.sql" in asked


def test_a_trace_with_python_frames_asks_whether_it_needs_them(monkeypatch):
    asked = _asked(monkeypatch)
    load_run(SHARED_TRACES[0].parent / "with_stack.json.gz").close()
    assert "frames_needed.sql" in asked


def _guards_asked(monkeypatch) -> list[str]:
    """The guards of the SQL files that a load asks of its tables from now on (sql.runs and sql._answer)."""
    asked = []
    runs, answer = sql.runs, sql._answer
    monkeypatch.setattr(sql, "runs", lambda con, guard: asked.append(guard) or runs(con, guard))

    def answering(con, guards, together, position, answers):
        asked.append(guards[position])
        return answer(con, guards, together, position, answers)

    monkeypatch.setattr(sql, "_answer", answering)
    return asked


def test_a_cuda_recording_does_not_ask_whether_two_runtimes_share_a_correlation(monkeypatch):
    assert rank_parts.TWO_RUNTIMES in sql.sql_text("attribution.sql"), "the guard rank_parts.py answers"
    asked = _guards_asked(monkeypatch)
    with load_run(REPO / "sample_traces" / "mlp") as run:
        assert run.launch_check().device_events > 0
    assert asked and rank_parts.TWO_RUNTIMES not in asked
