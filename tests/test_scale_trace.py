"""benchmarks/scale_trace.py: a scaled trace keeps the recorded pass's structure, copy after copy."""

import gzip
import json
import re
import sys

import pytest
from conftest import REPO
from kernelscope.analyzer import load_run
from reference import assert_matches_reference

sys.path.insert(0, str(REPO / "benchmarks"))
import scale_trace  # noqa: E402

RUNS = ["cuda_graph", "threads", "transformer_encoder"]  # graph replays, two threads, nested functionals
GROUP = ["module_name", "function_name", "op", "call_op", "kernel", "kind", "sample_id", "thread", "stream"]


@pytest.fixture(scope="module", params=RUNS)
def scaled(request, tmp_path_factory):
    run_dir = REPO / "sample_traces" / request.param
    out = tmp_path_factory.mktemp(request.param) / "trace.json"
    result = scale_trace.write_scaled(run_dir, out, copies=3, gzip_copy=True)
    return run_dir, out, result


def _per_group(frame):
    return frame.groupby(GROUP, dropna=False).agg(rows=("kernel", "size"), ns=("kernel_us", "sum"))


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_three_copies_are_three_times_the_rows_with_the_same_attribution(scaled, suffix):
    run_dir, out, _ = scaled
    with load_run(run_dir / "trace.json.gz") as run:
        one, one_summary = run.profiling_df(), run.describe(top_k=10_000)
    with load_run(f"{out}{suffix}") as run:
        three, three_summary = run.profiling_df(), run.describe(top_k=10_000)
    assert len(three) == 3 * len(one)
    assert three["correlation"].nunique() == 3 * one["correlation"].nunique()
    a, b = _per_group(one), _per_group(three)
    assert list(a.index) == list(b.index)
    assert list(b["rows"]) == [3 * n for n in a["rows"]]
    assert [round(x * 1000) for x in b["ns"]] == [3 * round(x * 1000) for x in a["ns"]]
    assert list(three_summary["function_name"]) == list(one_summary["function_name"])
    assert list(three_summary["num_modules"]) == list(one_summary["num_modules"])
    assert three_summary["time_spent_us"].tolist() == pytest.approx((3 * one_summary["time_spent_us"]).tolist())


def test_every_copy_matches_the_reference_attribution(scaled):
    _, out, _ = scaled
    with load_run(out) as run:
        assert_matches_reference(run, out)


def test_copies_follow_each_other_with_fresh_ids(scaled):
    _, out, result = scaled
    events = json.loads(out.read_bytes())["traceEvents"]
    assert len(events) == result["events"]
    assert gzip.decompress(out.with_name(out.name + ".gz").read_bytes()) == out.read_bytes()
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    ids = [e["args"]["External id"] for e in spans]
    assert len(ids) == len(set(ids)), "External ids are fresh in every copy"
    stamps = re.findall(rb'"(?:ts|dur)": (-?[0-9.]+)', out.read_bytes())
    assert stamps and all(re.fullmatch(rb"-?[0-9]+\.[0-9]{3}", s) for s in stamps), "µs with 3 decimals, as Kineto"


def test_size_picks_the_number_of_copies(tmp_path, capsys):
    out = tmp_path / "big.json"
    scale_trace.main([str(REPO / "sample_traces" / "mlp"), str(out), "--size", "40KB"])
    result = json.loads(capsys.readouterr().out)
    assert result["copies"] > 1 and abs(out.stat().st_size - 40 * 1024) < 40 * 1024 / result["copies"] + 4096
    with load_run(out) as run:
        assert len(run.profiling_df()) == 6 * result["copies"]
