"""The sample ids a run's rows name, checked against samples.json (rank_parts._check_sample_ids), come with the launch
check from ks_functions (attribution_rows.sql's last statement) instead of a SELECT of their own over `kernels`
(~0.5 ms of a small trace's load): the same pairs as that SELECT on every sample run."""

from __future__ import annotations

import pytest
from conftest import SAMPLE_RUNS
from kernelscope.analyzer import load_run, rank_parts


@pytest.mark.parametrize("run_dir", SAMPLE_RUNS, ids=lambda p: p.name)
def test_the_pairs_checked_are_those_the_rows_name(run_dir, monkeypatch):
    named = []
    real = rank_parts._check_sample_ids
    monkeypatch.setattr(rank_parts, "_check_sample_ids", lambda pairs, *a: named.append(pairs) or real(pairs, *a))
    with load_run(run_dir) as run:
        query = "SELECT DISTINCT function_name, sample_id FROM kernels WHERE sample_id IS NOT NULL"
        expected = sorted(map(tuple, run.sql(query).itertuples(index=False)))
        assert sorted({pair for pairs in named for pair in pairs}) == expected and named
