"""The runs index (analyzer/archive_index.py): the views read through it hold exactly the rows they hold without
it, whatever the index holds that is no longer committed, when it cannot be read, and when runs of two schemas
(an older kernelscope's, without kernels.call_event_id) are in it; adds write it and remove what it supersedes."""

import shutil

import duckdb
import pandas as pd
import pytest
from conftest import REPO, SHARED_TRACES, make_job
from kernelscope.analyzer import Archive, archive_runs
from kernelscope.analyzer import archive_index as index_module
from kernelscope.analyzer.archive_index import INDEX

SAMPLES = REPO / "sample_traces"
TABLES = ("runs", "events", "kernels", "samples")


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """An archive of five runs, one a job of two ranks: six parts, of which the index (written every 2 new runs)
    holds the first five (four runs); the sixth is read from its files."""
    tmp = tmp_path_factory.mktemp("indexed")
    job = make_job(tmp / "job", {0: SAMPLES / "mlp", 1: SAMPLES / "threads"})
    misc = next(p for p in SHARED_TRACES if p.name == "misc.json.gz")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_module, "INDEX_EVERY", 2)
        archive_runs([SAMPLES / "mlp", job, SAMPLES / "threads", misc, SAMPLES / "unet_block"], tmp / "archive")
    return tmp / "archive"


def _tables(path) -> dict[str, pd.DataFrame]:
    with Archive(path) as store:
        frames = {table: store.sql(f"SELECT * FROM {table} ORDER BY ALL") for table in TABLES}
        frames["list"] = store.runs()
    return frames


def _without_index(path, tmp_path):
    copy = tmp_path / "plain"
    shutil.copytree(path, copy)
    shutil.rmtree(copy / INDEX)
    return copy


def _assert_same(a: dict, b: dict) -> None:
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], obj=name)


def test_adds_write_the_index_and_remove_the_ones_it_supersedes(indexed):
    files = sorted(p.name for p in (indexed / INDEX).iterdir())
    assert len(files) == 1 and files[0].startswith("runs-4-"), files  # runs-2-… superseded
    held = duckdb.execute(f"SELECT count(*) FROM '{indexed / INDEX / files[0]}'").fetchall()[0][0]
    assert held == 5


def test_views_read_through_the_index_hold_the_rows_the_files_hold(indexed, tmp_path):
    _assert_same(_tables(indexed), _tables(_without_index(indexed, tmp_path)))


def test_runs_the_index_holds_but_that_were_removed_are_not_read(indexed, tmp_path):
    copy = tmp_path / "removed"
    shutil.copytree(indexed, copy)
    removed = Archive(copy).resolve("job")
    for table in TABLES:
        shutil.rmtree(copy / table / f"run_id={removed}")
    tables = _tables(copy)
    assert removed not in set(tables["list"]["run_id"])
    _assert_same(tables, _tables(_without_index(copy, tmp_path)))


def test_an_index_that_cannot_be_read_is_ignored(indexed, tmp_path):
    copy = tmp_path / "garbage"
    shutil.copytree(indexed, copy)
    (copy / INDEX / "runs-99-1.2.000000000000.0badcafe.parquet").write_bytes(b"not parquet")
    _assert_same(_tables(copy), _tables(indexed))


OLDER_LACKED = {"kernels": "call_event_id", "runs": "events, samples"}


def _as_older(archive, run_id) -> None:
    """The run's files rewritten as an older kernelscope wrote them: without kernels.call_event_id, without the
    runs row's counts of events and samples, and without the part each file is of in its footer."""
    for table in TABLES:
        (file,) = (archive / table / f"run_id={run_id}").rglob("*.parquet")
        lacked = f" EXCLUDE ({OLDER_LACKED[table]})" if table in OLDER_LACKED else ""
        duckdb.execute(
            f"COPY (SELECT *{lacked} FROM read_parquet('{file}', hive_partitioning = false)) "
            f"TO '{file}.tmp' (FORMAT parquet)"
        )
        shutil.move(f"{file}.tmp", file)


def test_runs_of_an_older_schema_are_read_beside_the_newer(indexed, tmp_path, monkeypatch):
    copy = tmp_path / "older"
    shutil.copytree(indexed, copy)
    shutil.rmtree(copy / INDEX)
    old = Archive(copy).resolve("threads")
    _as_older(copy, old)
    expected = _tables(copy)
    monkeypatch.setattr(index_module, "INDEX_EVERY", 1)
    assert index_module.refresh_index(Archive(copy).root, lambda parts: Archive(copy)._read(parts, "runs"))
    got = _tables(copy)
    _assert_same(got, expected)
    kernels = got["kernels"]
    assert kernels.loc[kernels["run_id"] == old, "call_event_id"].isna().all()
    assert kernels.loc[kernels["run_id"] != old, "call_event_id"].notna().any()


def test_a_reader_whose_index_was_superseded_opens_the_archive_again(indexed, tmp_path):
    copy = tmp_path / "superseded"
    shutil.copytree(indexed, copy)
    with Archive(copy) as store:
        before = store.sql("SELECT count(*) AS n FROM runs")
        (index,) = (copy / INDEX).iterdir()
        index.rename(index.with_name(index.name.replace("runs-4-", "runs-5-")))  # a newer index replaced it
        pd.testing.assert_frame_equal(store.sql("SELECT count(*) AS n FROM runs"), before)
