"""Many writers on one archive (archive_commit.py): 16 processes at once with kill -9 at random points, an add
killed after each of its renames, a lost race on one run, the cleanup of dead adds and never of live ones, files
flushed before they are published, and links inside the archive never written through."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, TESTS, make_job
from kernelscope.analyzer import Archive, KernelscopeError, load_run
from kernelscope.analyzer import archive_commit as commit
from kernelscope.analyzer.archive import run_id_of

MLP = REPO / "sample_traces" / "mlp"  # the smallest real run: 6 kernels
WRITERS = TESTS / "archive_writers.py"


def _copies(folder: Path, count: int, source: Path = MLP) -> list[Path]:
    """Copies of a run with distinct tags: distinct run ids, the same rows."""
    folder.mkdir()
    made = []
    for i in range(count):
        shutil.copytree(source, folder / f"run-{i}")
        manifest = json.loads((folder / f"run-{i}" / "manifest.json").read_text())
        manifest["tags"] = {"copy": str(i)}
        (folder / f"run-{i}" / "manifest.json").write_text(json.dumps(manifest))
        made.append(folder / f"run-{i}")
    return made


def _helper(*args) -> dict:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, WRITERS, *map(str, args)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _counts(store: Archive) -> dict:
    """Rows per run and table, as the views show them."""
    counts = {}
    for table in commit.TABLES:
        for run_id, rows in store.sql(f"SELECT run_id, count(*) FROM {table} GROUP BY ALL").values:
            counts.setdefault(run_id, {})[table] = int(rows)
    return counts


def _parquet_files(path: Path) -> set[Path]:
    return {p for table in commit.TABLES for p in (path / table).rglob("*.parquet")}


def _assert_only_committed_files(path: Path) -> None:
    """Nothing but the committed runs' files, and no staging: what the dead left is gone."""
    committed = {part.path(path, table) for part in commit.committed_parts(path) for table in commit.TABLES}
    assert _parquet_files(path) == committed
    assert not (path / commit.STAGING).exists()


@pytest.fixture(scope="module")
def one_run_rows():
    with load_run(MLP) as run:
        return {
            "events": len(run.sql("SELECT * FROM events")),
            "kernels": len(run.profiling_df()),
            "samples": len(run.sql("SELECT * FROM samples")),
            "runs": 1,
        }


def test_sixteen_writers_with_kill_9_lose_duplicate_and_half_show_no_run(tmp_path, one_run_rows):
    *sources, last = _copies(tmp_path / "sources", 49)
    path = tmp_path / "new-archive"
    result = _helper("writers", path, 19, 5, *sources)
    assert not [line for line in result["lines"] if line.startswith("failed")]
    started = {line.split()[2] for line in result["lines"] if line.startswith("started")}
    added = {line.split()[2]: line.split()[3] for line in result["lines"] if line.startswith("added")}
    killed = [os.WIFSIGNALED(status) for status in result["statuses"]]
    assert 1 <= sum(killed) <= 5, "the kills came while writers were at work"
    assert all(os.WIFSIGNALED(status) or os.WEXITSTATUS(status) == 0 for status in result["statuses"])
    store = Archive(path)
    listed = set(store.run_ids())
    assert set(added.values()) <= listed, "every completed add is listed"
    assert listed <= {run_id_of(s) for s in map(Path, started)}, "nothing else is"
    counts = _counts(store)
    assert set(counts) == listed, "no rows of a run that runs does not list"
    assert all(counts[run_id] == one_run_rows for run_id in listed), "each run's rows once, all of them"
    store.close()
    assert Archive(path).add(last)[1], "the next add removes what the killed writers left"
    _assert_only_committed_files(path)


RENAMES = 7  # a run of two ranks: three data files per rank, then the commit


@pytest.fixture(scope="module")
def killed_adds(tmp_path_factory):
    """For each n in 0..RENAMES, an archive whose add of a two-rank job was killed right after its nth rename."""
    tmp = tmp_path_factory.mktemp("killed")
    job = make_job(tmp / "job", {0: MLP, 1: REPO / "sample_traces" / "threads"})
    archives = [tmp / f"after-{renames}" for renames in range(RENAMES + 1)]
    for path in archives:
        Archive(path, create=True)
    statuses = _helper("kill-after-renames", job, *archives)["statuses"]
    assert [os.WIFSIGNALED(s) and os.WTERMSIG(s) for s in statuses] == [signal.SIGKILL] * len(archives)
    return job, archives


@pytest.mark.parametrize("renames", range(RENAMES + 1))
def test_an_add_killed_after_each_rename_shows_nothing_until_committed(renames, killed_adds):
    job, archives = killed_adds
    path = archives[renames]
    assert (path / commit.STAGING).is_dir(), "the killed add's record is left"
    assert len([p for p in _parquet_files(path) if "/runs/" not in str(p)]) == min(renames, RENAMES - 1)
    committed = renames == RENAMES
    assert Archive(path).run_ids() == ([run_id_of(job)] if committed else [])
    if committed:
        assert set(Archive(path).sql("SELECT DISTINCT rank FROM kernels")["rank"]) == {0, 1}
    run_id, added = Archive(path).add(job)
    assert run_id == run_id_of(job) and added is not committed
    _assert_only_committed_files(path)
    with Archive(path) as store:
        assert sorted(store.sql("SELECT rank FROM runs")["rank"]) == [0, 1]


def test_the_loser_of_a_race_on_one_run_removes_its_files(tmp_path, monkeypatch):
    path = tmp_path / "arch"
    store = Archive(path, create=True)
    real_commit = commit.Add.commit
    won = []

    def commit_after_another_add(self, ranks):
        if not won:  # another process adds the same run between this add's staging and its commit
            won.append(None)
            won[0] = Archive(path).add(MLP)
        return real_commit(self, ranks)

    monkeypatch.setattr(commit.Add, "commit", commit_after_another_add)
    assert store.add(MLP) == (run_id_of(MLP), False)
    assert won == [(run_id_of(MLP), True)]
    _assert_only_committed_files(path)
    assert len(Archive(path).sql("SELECT * FROM runs")) == 1


def test_a_live_writers_staging_is_left_and_a_dead_ones_removed(tmp_path):
    path = tmp_path / "arch"
    Archive(path, create=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        token = f"{other.pid}.{commit._start_time(other.pid)}.{commit._this_machine()}.0badcafe"
        staged = path / commit.STAGING / f"run-0123456789ab.{token}"
        staged.mkdir(parents=True)
        published = commit.Part("run-0123456789ab", 0, token).path(path, "events")
        published.parent.mkdir(parents=True)
        published.write_bytes(b"half an add")
        foreign = path / commit.STAGING / f"run-0123456789ab.{other.pid}.1.000000000000.0badcafe"
        foreign.mkdir()
        assert commit.remove_dead_adds(path) == [] and staged.is_dir() and published.is_file()
    finally:
        other.kill()
        other.wait()
    assert commit.remove_dead_adds(path) == [staged.name]
    assert not staged.exists() and not published.exists() and not published.parent.exists()
    assert foreign.is_dir(), "another machine's add is never judged"


def test_a_reused_pid_does_not_keep_a_dead_add_alive(tmp_path):
    path = tmp_path / "arch"
    Archive(path, create=True)
    start = commit._start_time(os.getpid())
    staged = path / commit.STAGING / f"run-0123456789ab.{os.getpid()}.{start + 1}.{commit._this_machine()}.0badcafe"
    staged.mkdir(parents=True)
    assert commit.remove_dead_adds(path) == [staged.name], "same pid, another start time: another process"


def test_staged_files_are_flushed_before_the_renames_that_publish_them(tmp_path, monkeypatch):
    """Each data file is flushed before its rename, and its partition folder after it; the commit, renaming the
    runs folder, comes after all of that and its own file's flush."""
    path = tmp_path / "arch"
    store = Archive(path, create=True)
    flushed, renames = [], []
    fsync, rename = os.fsync, os.rename

    def recording_fsync(fd):
        flushed.append(os.fstat(fd).st_ino)
        return fsync(fd)

    def recording_rename(src, dst):
        files = [Path(src)] if Path(src).is_file() else list(Path(src).rglob("*.parquet"))
        renames.append((Path(dst), {os.stat(f).st_ino for f in files}, set(flushed)))
        return rename(src, dst)

    monkeypatch.setattr(commit.os, "fsync", recording_fsync)
    monkeypatch.setattr(commit.os, "rename", recording_rename)
    store.add(MLP)
    *published, (committed, committed_files, flushed_before_commit) = renames
    assert [dst.parent.parent.parent.name for dst, _, _ in published] == ["events", "kernels", "samples"]
    assert committed.parent.name == "runs" and committed_files <= flushed_before_commit
    for dst, files, flushed_before in published:
        assert len(files) == 1 and files <= flushed_before, f"{dst} was published before it was flushed"
        assert os.stat(dst.parent).st_ino in flushed_before_commit, f"{dst.parent} was not flushed before the commit"


@pytest.mark.parametrize("inside", ["kernels", ".staging", "kernels/run_id={run_id}"])
def test_a_link_inside_the_archive_is_not_written_through(inside, tmp_path):
    path, outside = tmp_path / "arch", tmp_path / "outside"
    Archive(path, create=True)
    outside.mkdir()
    link = path / inside.format(run_id=run_id_of(MLP))
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)
    with pytest.raises(KernelscopeError, match=r"is a symbolic link inside the archive; kernelscope writes only"):
        Archive(path).add(MLP)
    assert list(outside.iterdir()) == [] and Archive(path).run_ids() == []
