"""Every real GPU run of sample_traces/: row accounting, summary invariants, golden summaries.

Set KERNELSCOPE_UPDATE_GOLDEN=1 to rewrite tests/golden/ after an intended change of results; the diff
of those files is then the visible record of what changed.
"""

import gzip
import json
import os
from pathlib import Path

import pandas as pd
import pytest
from conftest import SAMPLE_RUNS
from kernelscope.analyzer import describe_results, load_run

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("KERNELSCOPE_UPDATE_GOLDEN") == "1"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def test_there_are_sample_runs():
    assert len(SAMPLE_RUNS) >= 11


@pytest.fixture(scope="module", params=SAMPLE_RUNS, ids=lambda p: p.name)
def loaded(request):
    run = load_run(request.param)
    yield request.param, run
    run.close()


def test_every_device_event_is_exactly_one_row(loaded):
    run_dir, run = loaded
    events = json.loads(gzip.decompress((run_dir / "trace.json.gz").read_bytes()))["traceEvents"]
    device = [e for e in events if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS]
    frame = run.profiling_df()
    assert len(frame) == len(device) and frame["event_id"].is_unique
    total_ns = sum(round(float(e["dur"]) * 1000) for e in device)
    assert round(frame["kernel_us"].sum() * 1000) == total_ns


def test_summary_invariants(loaded):
    _, run = loaded
    summary = run.describe(top_k=10_000)
    assert summary["time_spent_pct"].sum() == pytest.approx(100.0)
    collected = summary.dropna(subset=["calls"])
    assert (collected["calls"] >= collected["num_distinct_samples"]).all()
    assert (collected["num_distinct_samples"] >= 1).all()
    not_collected = summary[summary["calls"].isna()]
    assert not_collected["num_distinct_samples"].isna().all() and not_collected["tensor_size_MB"].isna().all()
    frame = run.profiling_df()
    assert summary["time_spent_us"].sum() == pytest.approx(frame.loc[frame["function_name"].notna(), "kernel_us"].sum())
    # the API's describe_results over the offline frames gives the same table
    pd.testing.assert_frame_equal(describe_results(frame, run.function_data(), top_k=10_000), summary)


def test_sample_ids_point_to_stored_signatures(loaded):
    _, run = loaded
    dangling = run.sql(
        "SELECT count(*) AS n FROM kernels k WHERE sample_id IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM samples s WHERE s.function_name = k.function_name AND s.sample_id = k.sample_id)"
    )["n"][0]
    assert dangling == 0


def _snapshot(run) -> str:
    summary = run.describe(top_k=10_000)
    return summary.to_csv(index=False, float_format="%.3f")


def test_golden_summary(loaded):
    run_dir, run = loaded
    path = GOLDEN / f"{run_dir.name}.summary.csv"
    text = _snapshot(run)
    if UPDATE or not path.exists():
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
        if not UPDATE:
            pytest.fail(f"{path} did not exist and was written; commit it")
    assert text == path.read_text()
