"""A loaded Run as Python shows it (analyzer/run.py): one line naming what was loaded, counted once."""

from conftest import REPO, make_job
from kernelscope.analyzer import load_run

SAMPLES = REPO / "sample_traces"


class CountingConnection:
    """A DuckDB connection that counts the statements run through it."""

    def __init__(self, con):
        self.con, self.statements = con, 0

    def execute(self, *args, **kwargs):
        self.statements += 1
        return self.con.execute(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.con, name)


def test_a_run_shows_its_path_ranks_device_and_rows_in_one_line():
    with load_run(SAMPLES / "mlp") as run:
        rows = len(run.profiling_df())
        counting = run._con = CountingConnection(run._con)
        assert repr(run) == str(run) == f"Run({str(SAMPLES / 'mlp')!r}, ranks=[0], device='cuda', rows={rows})"
        assert repr(run) == repr(run) and counting.statements == 0, "counted as the run was loaded, not per repr"
        run._con = counting.con
    assert repr(run).endswith(f"rows={rows}, closed)")


def test_a_run_counted_at_its_first_repr_and_a_job_of_many_ranks(tmp_path):
    with load_run(SAMPLES / "demo", allow_empty=True) as run:  # allow_empty: nothing counted at the load
        counting = run._con = CountingConnection(run._con)
        first = repr(run)
        assert "device='cuda', rows=" in first and repr(run) == first and counting.statements == 1
        assert run.device == "cuda" and counting.statements == 1, "the device is read from the same count"
        run._con = counting.con
    run = load_run(SAMPLES / "mlp", allow_empty=True)
    run.close()
    assert repr(run) == f"Run({str(SAMPLES / 'mlp')!r}, ranks=[0], closed)", "a closed run is not queried"
    job = make_job(tmp_path / "job", {rank: SAMPLES / "mlp" for rank in range(6)})
    with load_run(job) as run:
        assert repr(run).startswith(f"Run({str(job)!r}, ranks=[0, 1, …, 5] (6), device='cuda', rows=")


def test_functions_the_sample_store_holds_and_the_trace_never_calls_are_a_note_not_a_failure(tmp_path):
    """samples.json of a run holding a function that no call scope of its trace names (files of two runs): the run
    loads, its rows and summary are the trace's, and a note names the functions with their calls."""
    import json
    import shutil

    run_dir = tmp_path / "mlp"
    shutil.copytree(REPO / "sample_traces" / "mlp", run_dir)
    with load_run(run_dir) as run:
        assert run.notes() == []
        expected = run.describe()
    store = json.loads((run_dir / "samples.json").read_text())
    functions = store["functions"]
    functions["gelu"] = [dict(functions["relu"][0], calls=3)]
    functions["line"] = [dict(functions["linear"][0], calls=1)]  # a name the scopes of linear begin with
    (run_dir / "samples.json").write_text(json.dumps(store))
    with load_run(run_dir) as run:
        assert run.notes() == [
            f"{run_dir / 'samples.json'}: holds samples of gelu (3 calls), line (1 call), which no call scope of"
            " the trace names: they are in table samples and function_data, in no row of kernels, and describe()"
            " leaves them out"
        ]
        assert run.describe().equals(expected)
        assert set(run.function_data()) == {"linear", "relu", "gelu", "line"}
