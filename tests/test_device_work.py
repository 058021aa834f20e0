"""A trace without device work (no device event, no runtime or driver call) does not run attribution.sql's launch
steps: their tables are made empty and its launch check zero, which is what the steps make of such a trace. Checked
on a CPU-only copy of every sample and shared trace (its device events and launches left out): the same rows, column
types and launch check as with the steps run, and the rows tests/reference.py reads off the copy."""

from __future__ import annotations

import gzip
import json
from dataclasses import astuple
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, SHARED_TRACES
from kernelscope.analyzer import connection, load_run, rank_parts, sql
from reference import LEGACY_CATS, assert_matches_reference
from reference_devices import is_launch

DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
TRACES = sorted(
    [
        *(REPO / "sample_traces").glob("*/trace.json.gz"),
        *SHARED_TRACES,
        *(p for p in (REPO / "sample_traces" / "external").iterdir() if p.name.endswith((".json", ".json.gz"))),
    ]
)


def _device_work(event) -> bool:
    cat = event.get("cat") if isinstance(event, dict) else None
    cat = LEGACY_CATS.get(cat, cat)
    return cat in DEVICE_WORK or is_launch(cat)


def cpu_only_copy(trace: Path, folder: Path) -> Path:
    """``trace`` less its device events and launches, as a bare trace in ``folder``."""
    opened = gzip.open if trace.name.endswith(".gz") else open
    with opened(trace, "rt", encoding="utf-8") as file:
        document = json.load(file)
    events = document["traceEvents"] if isinstance(document, dict) else document
    kept = [event for event in events if not _device_work(event)]
    if isinstance(document, dict):
        document["traceEvents"] = kept
    else:
        document = kept
    copy = folder / f"{trace.parent.name}_{trace.name.split('.')[0]}.json"
    copy.write_text(json.dumps(document))
    return copy


def _kernels(run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table ``kernels`` in event order, and its columns' names and types."""
    rows = run.con.execute("SELECT * FROM kernels ORDER BY event_id").df()
    return rows, run.con.execute("DESCRIBE kernels").df()[["column_name", "column_type"]]


@pytest.fixture
def launch_steps_always(monkeypatch):
    """attribution.sql as a caller that does not know whether the trace holds device work runs it: its launch steps
    run whatever the trace."""
    real = rank_parts.run_sql_file

    def unknowing(con, name, *, known=None, **literals):
        return real(con, name, **literals)

    monkeypatch.setattr(rank_parts, "run_sql_file", unknowing)


def test_a_trace_without_device_work_makes_no_launch_step_table(tmp_path):
    copy = cpu_only_copy(REPO / "sample_traces" / "mlp" / "trace.json.gz", tmp_path)
    # a kept connection holds an earlier run's step tables (dropped only when it is handed to a user): none here
    connection._close_instances()
    with load_run(copy) as run:
        # a small trace keeps its step tables to the end of its connection (run_settings.keeps_steps)
        made = run._con.execute("SELECT list(table_name) FROM duckdb_tables() WHERE temporary").fetchone()[0]
        assert "ks_anchors" in made and "ks_launches" not in made and "ks_items" not in made  # its items: ks_anchors
        assert run.device == "cpu" and astuple(run.launch_check()) == (0, 0, 0, 0)


def test_a_trace_without_device_work_has_a_check_of_zeros_on_the_connection_a_cuda_run_kept(tmp_path):
    # attribution.sql sets no check for it: the connection kept from the run before holds that run's
    mlp = REPO / "sample_traces" / "mlp" / "trace.json.gz"
    with load_run(mlp) as run:
        assert run.launch_check().launches > 0
    with load_run(cpu_only_copy(mlp, tmp_path)) as run:
        assert run.device == "cpu" and astuple(run.launch_check()) == (0, 0, 0, 0)


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_without_device_work_the_rows_are_those_of_the_launch_steps_and_the_reference(trace, tmp_path, request):
    copy = cpu_only_copy(trace, tmp_path)
    with load_run(copy) as run:
        assert run.device == "cpu"
        assert_matches_reference(run, copy)
        skipped, check = _kernels(run), astuple(run.launch_check())
    request.getfixturevalue("launch_steps_always")
    with load_run(copy) as run:
        ran = _kernels(run)
        assert astuple(run.launch_check()) == check == (0, 0, 0, 0)
    pd.testing.assert_frame_equal(skipped[1], ran[1])
    pd.testing.assert_frame_equal(skipped[0], ran[0])


@pytest.mark.parametrize("trace", ["mlp/trace.json.gz", "cpu-only copy"])
def test_a_load_asks_no_guard_it_knows_the_answer_of(trace, tmp_path, monkeypatch):
    # frames_needed.sql answers whether the trace holds device work in the SELECT it runs anyway, and a trace without
    # any has no device event: asked as guards, each cost a SELECT of its own
    path = REPO / "sample_traces" / "mlp" / "trace.json.gz"
    path = cpu_only_copy(path, tmp_path) if trace == "cpu-only copy" else path
    asked = []
    real = rank_parts.run_sql_file

    def noting(con, name, *, known=None, **literals):
        if name in ("attribution.sql", "attribution_rows.sql"):
            guards = sql._statement_guards(con, name)
            asked.extend(g for g in guards if g is not None and g not in (known or {}))
        return real(con, name, known=known, **literals)

    monkeypatch.setattr(rank_parts, "run_sql_file", noting)
    load_run(path).close()
    assert not [guard for guard in asked if "ks_device_work" in guard]
    # nor, without device work, those of the launch check, which is then zeros
    launch_check = [guard for guard in asked if "ks_launch_check" in guard]
    assert set(launch_check) == (
        set()
        if trace == "cpu-only copy"
        else {rank_parts.LOST_LAUNCHES, rank_parts.CPU_ROWS, rank_parts.UNPLACED}
    )
    # and attribution_rows.sql's guard of the check is answered by attribution.sql's, asked once
    assert launch_check.count(rank_parts.CPU_ROWS) == (0 if trace == "cpu-only copy" else 1)
