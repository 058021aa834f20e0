"""Multi-rank runs: a real 2-process gloo job on the CPU writes one run per rank into one job directory,
and the analyzer loads the job as one run with a rank column; describe per rank and merged."""

import gzip
import json
import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import REPO, make_job
from kernelscope.analyzer import BadInputError, load_run
from kernelscope.cli import main

WORKER = textwrap.dedent(
    """
    import sys
    import torch
    import torch.distributed as dist
    from torch import nn
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    rank, init_file, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    class ColumnSums(nn.Module):
        # a collective inside a module's forward, of the same shape on every rank whatever the batch
        def forward(self, x):
            sums = x.sum(dim=0)
            dist.all_reduce(sums)
            return x + sums

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), ColumnSums())
    # as many passes on each rank (each all_reduce needs its peer's), but rank 1's second input has another shape:
    # its summary must differ from rank 0's
    samples = [((torch.randn(4, 8),), {}), ((torch.randn(6 if rank == 1 else 4, 8),), {})]
    ModuleFunctionKernelProfiler().profile(model, samples, warmup_iterations=1, out=out)
    dist.barrier()
    dist.destroy_process_group()
    """
)


@pytest.fixture(scope="module")
def gloo_job(tmp_path_factory):
    pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("gloo")
    (tmp / "worker.py").write_text(WORKER)
    job = tmp / "job"
    _run_ranks([[sys.executable, str(tmp / "worker.py"), str(rank), str(tmp / "init"), str(job)] for rank in (0, 1)])
    return job


def _run_ranks(commands, envs=None, cwd=None, timeout=180):
    """Start one process per rank, wait for all (killing them past ``timeout``), check they succeeded."""
    workers = [
        subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for command, env in zip(commands, envs or [None] * len(commands), strict=True)
    ]
    try:
        outputs = [w.communicate(timeout=timeout)[0] for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    assert [w.returncode for w in workers] == [0] * len(workers), outputs


def test_each_rank_writes_its_own_run_in_the_job_directory(gloo_job):
    assert sorted(p.name for p in gloo_job.iterdir()) == ["rank-0", "rank-1"], "no collision, no leftovers"
    for rank in (0, 1):
        with load_run(gloo_job / f"rank-{rank}") as run:
            assert run.ranks == [rank]
            assert (run.manifest["rank"], run.manifest["world_size"], run.manifest["backend"]) == (rank, 2, "gloo")


def test_the_job_loads_as_one_run_with_a_rank_column(gloo_job):
    with load_run(gloo_job) as job:
        assert job.ranks == [0, 1]
        kernels = job.profiling_df()
        assert set(kernels["rank"]) == {0, 1}
        for rank in (0, 1):
            with load_run(gloo_job / f"rank-{rank}") as alone:
                one = kernels[kernels["rank"] == rank].reset_index(drop=True)
                pd.testing.assert_frame_equal(one, alone.profiling_df())
                pd.testing.assert_frame_equal(job.describe(rank=rank), alone.describe())
        samples = job.sql(
            "SELECT rank, function_name, count(*) AS n FROM samples WHERE function_name IN ('linear', 'relu') "
            "GROUP BY ALL ORDER BY ALL"
        )
        assert samples.values.tolist() == [[0, "linear", 1], [0, "relu", 1], [1, "linear", 2], [1, "relu", 2]]


def test_a_collective_is_a_call_inside_the_module_that_made_it(gloo_job):
    with load_run(gloo_job) as job:
        rows = job.sql(
            "SELECT rank, module_name, op, count(DISTINCT call_event_id) AS calls FROM kernels "
            "WHERE function_name = 'torch.distributed.all_reduce' GROUP BY ALL ORDER BY ALL"
        )
        assert rows.values.tolist() == [[0, "2", "c10d::allreduce_", 2], [1, "2", "c10d::allreduce_", 2]]
        calls = job.describe_by_rank().set_index(["rank", "function_name"])["calls"]
        assert calls[(0, "torch.distributed.all_reduce")] == calls[(1, "torch.distributed.all_reduce")] == 2


def test_describe_per_rank_and_merged(gloo_job):
    with load_run(gloo_job) as job:
        merged = job.describe().set_index("function_name")
        by_rank = job.describe_by_rank().set_index(["rank", "function_name"])
        assert by_rank.loc[(0, "linear"), "num_distinct_samples"] == 1
        assert by_rank.loc[(1, "linear"), "num_distinct_samples"] == 2
        # the (4, 8) input is the same signature on both ranks: merged, it is one sample called three times
        assert merged.loc["linear", "calls"] == 4 and merged.loc["linear", "num_distinct_samples"] == 2
        for function in ("linear", "relu"):
            per_rank = by_rank.xs(function, level="function_name")["time_spent_us"].sum()
            assert merged.loc[function, "time_spent_us"] == pytest.approx(per_rank)
        assert merged["time_spent_pct"].sum() == pytest.approx(100.0)


def test_cli_describes_one_rank_or_each(gloo_job):
    by_rank = CliRunner().invoke(main, ["analyze", str(gloo_job), "--by-rank", "--format", "csv"])
    assert by_rank.exit_code == 0 and by_rank.output.startswith("rank,function_name,")
    assert {line.split(",")[0] for line in by_rank.output.strip().splitlines()[1:]} == {"0", "1"}
    one = CliRunner().invoke(main, ["analyze", str(gloo_job), "--rank", "1", "--kernels", "--format", "csv"])
    assert one.exit_code == 0 and {line.split(",")[-1] for line in one.output.strip().splitlines()[1:]} == {"1"}
    missing = CliRunner().invoke(main, ["analyze", str(gloo_job), "--rank", "5"])
    assert missing.exit_code == 2 and "has no rank 5 (its ranks: 0, 1)" in missing.output


SAMPLES = REPO / "sample_traces"


def test_a_job_of_sample_runs_keeps_each_ranks_sample_ids(tmp_path):
    job = make_job(tmp_path / "job", {0: SAMPLES / "mlp", 1: SAMPLES / "demo"})
    with load_run(job) as run:
        dangling = run.sql(
            "SELECT count(*) AS n FROM kernels k WHERE sample_id IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM samples s WHERE (s.rank, s.function_name, s.sample_id) = (k.rank, k.function_name, "
            "k.sample_id))"
        )["n"][0]
        assert dangling == 0
        assert run.launch_check().device_events == sum(
            load_run(SAMPLES / name).launch_check().device_events for name in ("mlp", "demo")
        )


def test_ranks_that_do_not_belong_together_are_refused(tmp_path):
    mislabeled = make_job(tmp_path / "a", {0: SAMPLES / "mlp", 1: SAMPLES / "demo"})
    (mislabeled / "rank-1").rename(mislabeled / "rank-2")
    with pytest.raises(BadInputError, match="holds the run of rank 1, not of rank 2"):
        load_run(mislabeled)
    mixed = make_job(tmp_path / "b", {0: SAMPLES / "mlp"}, world_size=2)
    other = make_job(tmp_path / "c", {1: SAMPLES / "demo"}, world_size=4)
    (other / "rank-1").rename(mixed / "rank-1")
    with pytest.raises(BadInputError, match="different jobs"):
        load_run(mixed)
    partial = make_job(tmp_path / "d", {0: SAMPLES / "mlp"}, world_size=2)
    with pytest.warns(RuntimeWarning, match="ranks 1 of 2 were not recorded"):
        load_run(partial).close()


FACTORY = textwrap.dedent(
    """
    import os, time
    import torch
    import torch.distributed as dist
    from torch import nn

    def job():
        rank = int(os.environ["KS_TEST_RANK"])
        dist.init_process_group("gloo", init_method=os.environ["KS_TEST_INIT"], rank=rank, world_size=2)
        if rank == 1:
            time.sleep(1.5)  # the ranks' clocks read different seconds: the default names must still agree
        return nn.Linear(4, 4), [((torch.randn(2, 4),), {})]
    """
)


def test_cli_record_in_a_job_names_one_job_directory_for_all_ranks(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "ranked.py").write_text(FACTORY)
    _run_ranks(
        [[sys.executable, "-m", "kernelscope.cli", "record", "ranked:job", "--warmup", "0"]] * 2,
        [{**os.environ, "KS_TEST_RANK": str(rank), "KS_TEST_INIT": f"file://{tmp_path}/init"} for rank in (0, 1)],
        cwd=tmp_path,
    )
    (job,) = tmp_path.glob("kernelscope-job-*")
    assert sorted(p.name for p in job.iterdir()) == ["rank-0", "rank-1"]


def _plain_trace(path, rank):
    """The mlp run's trace as a plain trace of ``rank`` (``None``: naming no rank), as torch.profiler writes one."""
    doc = json.loads(gzip.decompress((REPO / "sample_traces" / "mlp" / "trace.json.gz").read_bytes()))
    doc.pop("distributedInfo", None)
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def test_a_directory_of_plain_traces_loads_as_a_job_of_the_ranks_they_name(tmp_path):
    """As HolisticTraceAnalysis reads a trace directory: each file one rank, by its distributedInfo.rank."""
    job = tmp_path / "traces"
    job.mkdir()
    alone = _plain_trace(tmp_path / "alone.json.gz", None)
    _plain_trace(job / "rank-1.Mar_25_20_48_12.2861.pt.trace.json.gz", 1)
    _plain_trace(job / "sampled_rank-0.json.gz", 0)
    with load_run(job) as run, load_run(alone) as one:
        assert run.ranks == [0, 1]
        single = one.profiling_df().drop(columns="rank")
        for rank in (0, 1):
            assert run.profiling_df(rank).drop(columns="rank").reset_index(drop=True).equals(single)


def test_every_row_has_its_ranks_column_without_a_default(tmp_path, gloo_job):
    """The ingest writes the rank a run directory names; a bare trace's, which its header names, replaces it once the
    trace is read (events_rank.sql). Either way the column is the tables' last, of no default, as an ALTER left it."""
    named = _plain_trace(tmp_path / "named.json.gz", 3)
    for path, ranks in ((named, [3]), (gloo_job / "rank-1", [1]), (gloo_job, [0, 1])):
        with load_run(path) as run:
            for table in ("events", "kernels"):
                assert run.sql(f"SELECT DISTINCT rank FROM {table} ORDER BY 1")["rank"].tolist() == ranks, path
                columns = run.sql(f"SELECT * FROM duckdb_columns() WHERE table_name = '{table}' ORDER BY column_index")
                assert columns["column_name"].iloc[-1] == "rank" and columns["column_default"].isna().all(), path


def test_a_directory_of_plain_traces_naming_one_rank_twice_is_refused_naming_both(tmp_path):
    job = tmp_path / "traces"
    job.mkdir()
    _plain_trace(job / "a.pt.trace.json.gz", None)
    _plain_trace(job / "b.pt.trace.json.gz", 0)
    with pytest.raises(BadInputError) as raised:
        load_run(job)
    assert str(raised.value) == (
        f"{job}: holds rank 0 twice (a.pt.trace.json.gz and b.pt.trace.json.gz, by their distributedInfo.rank, 0 where"
        " a trace names none): a folder of traces is one job, one trace per rank; traces of separate runs load each on"
        " its own"
    )
