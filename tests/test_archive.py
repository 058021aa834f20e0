"""Archives: hive-partitioned Parquet of runs, idempotent adds, the runs table, exact reproduction of a
run's tables, other engines (pyarrow) reading the files, and the CLI (archive, runs, sql, analyze --run)."""

import gzip
import json
import os
import re
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import REPO, SHARED_TRACES, make_job
from kernelscope.analyzer import Archive, BadInputError, KernelscopeError, archive_runs, load_run
from kernelscope.analyzer import archive as archive_module
from kernelscope.analyzer.archive import is_archive, run_id_of
from kernelscope.cli import main

SAMPLES = REPO / "sample_traces"
TABLES = ("events", "kernels", "samples", "sample_totals", "summary")
MISC = next(p for p in SHARED_TRACES if p.name == "misc.json.gz")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sources")
    tagged = tmp / "tagged"
    shutil.copytree(SAMPLES / "mlp", tagged)
    manifest = json.loads((tagged / "manifest.json").read_text())
    manifest.update(git_commit="0123456789abcdef0123456789abcdef01234567", tags={"team": "infra"})
    (tagged / "manifest.json").write_text(json.dumps(manifest))
    job = make_job(tmp / "job", {0: SAMPLES / "demo", 1: SAMPLES / "threads"})
    return {"run": SAMPLES / "demo", "tagged": tagged, "job": job, "trace": MISC}


@pytest.fixture(scope="module")
def archived(sources, tmp_path_factory):
    path = tmp_path_factory.mktemp("archive") / "arch"
    ids = archive_runs(list(sources.values()), path)
    assert all(added for _, added in ids)
    return path, dict(zip(sources, (run_id for run_id, _ in ids), strict=True))


def _tree(path):
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}


@pytest.mark.parametrize("kind", ["run", "tagged", "job", "trace"])
def test_an_archived_run_reproduces_its_tables_exactly(kind, sources, archived):
    path, ids = archived
    with Archive(path).run(ids[kind]) as back, load_run(sources[kind]) as original:
        assert back.ranks == original.ranks
        for table in TABLES:
            pd.testing.assert_frame_equal(back.sql(f"DESCRIBE {table}"), original.sql(f"DESCRIBE {table}"))
            # a table's rows in no particular order (docs/sql.md): the same rows, in any order
            query = f"SELECT * FROM {table} ORDER BY ALL"
            pd.testing.assert_frame_equal(back.sql(query), original.sql(query))
        pd.testing.assert_frame_equal(back.profiling_df(), original.profiling_df())
        pd.testing.assert_frame_equal(back.describe(top_k=1000), original.describe(top_k=1000))
        assert back.function_data() == original.function_data()
        assert back.manifests == original.manifests and back.launch_check() == original.launch_check()
        if kind == "job":
            pd.testing.assert_frame_equal(back.describe_by_rank(), original.describe_by_rank())


def test_the_layout_is_hive_partitioned_by_run_and_rank(archived):
    path, ids = archived
    for table in ("events", "kernels", "samples", "runs"):
        parts = {p.relative_to(path / table).parent.as_posix() for p in (path / table).rglob("*.parquet")}
        assert f"run_id={ids['job']}/rank=1" in parts and f"run_id={ids['run']}/rank=0" in parts
        assert len(parts) == 5, "one partition per run and rank"
    assert not (path / ".staging").exists()


def test_archiving_the_same_run_again_changes_nothing(sources, archived):
    path, ids = archived
    before = _tree(path)
    again = archive_runs([sources["job"], sources["run"]], path)
    assert again == [(ids["job"], False), (ids["run"], False)]
    assert _tree(path) == before


def test_the_runs_table_comes_from_the_manifests(archived):
    path, ids = archived
    with Archive(path) as store:
        runs = store.sql("SELECT * FROM runs ORDER BY run_id, rank").set_index(["run_id", "rank"])
        tagged = runs.loc[(ids["tagged"], 0)]
        assert tagged["git_commit"] == "0123456789abcdef0123456789abcdef01234567"
        assert json.loads(tagged["tags"]) == {"team": "infra"} and tagged["name"] == "tagged"
        assert (tagged["hostname"], tagged["gpu_name"], tagged["torch_version"], tagged["cuda_version"]) == (
            "vm",
            "NVIDIA H200",
            "2.11.0+cu130",
            "13.0",
        )
        source = json.loads((SAMPLES / "mlp" / "manifest.json").read_text())
        started = pd.Timestamp(source["start_time"])
        assert pd.Timestamp(tagged["start_time"]) == started
        with load_run(SAMPLES / "mlp") as original:
            kernel_us = original.profiling_df()["kernel_us"].sum()
        assert tagged["kernels"] == 6 and tagged["kernel_us"] == pytest.approx(kernel_us)
        job = runs.loc[ids["job"]]
        assert list(job.index) == [0, 1] and set(job["world_size"]) == {2} and set(job["backend"]) == {"nccl"}
        assert pd.isna(runs.loc[(ids["trace"], 0), "hostname"]), "a bare trace has no manifest"
        listed = store.runs().set_index("run_id")
        assert listed.loc[ids["job"], "ranks"] == 2
        assert listed.loc[ids["job"], "kernels"] == runs.loc[ids["job"], "kernels"].sum()


def test_queries_run_across_runs(archived):
    path, ids = archived
    with Archive(path) as store:
        counts = store.sql("SELECT run_id, rank, count(*) AS n FROM kernels GROUP BY ALL")
        for kind, source in (("run", SAMPLES / "demo"), ("trace", MISC)):
            with load_run(source) as run:
                assert counts.set_index("run_id").loc[ids[kind], "n"] == len(run.profiling_df())
        joined = store.sql(
            "SELECT r.name, sum(k.kernel_us) AS us FROM kernels k JOIN runs r USING (run_id, rank) GROUP BY ALL"
        )
        assert set(joined["name"]) == {"demo", "tagged", "job", "misc.json.gz"}


def test_pyarrow_reads_the_partitions_without_conversion(archived):
    pq = pytest.importorskip("pyarrow.parquet")
    path, ids = archived
    table = pq.read_table(path / "kernels").to_pandas()
    assert {str(v) for v in table["run_id"].unique()} == set(ids.values())
    job = table[table["run_id"] == ids["job"]]
    assert sorted(int(r) for r in job["rank"].unique()) == [0, 1]
    with load_run(SAMPLES / "threads") as threads:
        assert (job["rank"].astype(int) == 1).sum() == len(threads.profiling_df())
        assert job.loc[job["rank"].astype(int) == 1, "kernel_us"].sum() == pytest.approx(
            threads.profiling_df()["kernel_us"].sum()
        )


def test_other_engines_read_the_files_of_the_complete_runs(archived, tmp_path):
    """Archive.files() names what the views read; a file an add killed before its commit left in a partition is
    in the folder (pyarrow reading the folder sees it) but not in that list."""
    ds = pytest.importorskip("pyarrow.dataset")
    path, ids = archived
    copy = tmp_path / "arch"
    shutil.copytree(path, copy)
    committed = Archive(copy).files("kernels")
    leftover = committed[0].with_name("part-1.2.000000000000.0badcafe.parquet")
    shutil.copy(committed[0], leftover)
    dataset = ds.dataset(
        [str(f) for f in Archive(copy).files("kernels")], partitioning="hive", partition_base_dir=str(copy / "kernels")
    )
    read = dataset.to_table().to_pandas()
    with Archive(copy) as store:
        counts = store.sql("SELECT run_id, rank, count(*) AS n FROM kernels GROUP BY ALL ORDER BY ALL")
    by_pyarrow = read.groupby(["run_id", "rank"], observed=True).size().sort_index()
    assert [(str(r), int(k), n) for (r, k), n in by_pyarrow.items()] == [tuple(row) for row in counts.values]
    assert len(ds.dataset(str(copy / "kernels"), partitioning="hive").to_table()) > len(read), "the folder has more"
    with pytest.raises(ValueError, match="table must be one of"):
        Archive(copy).files("summary")


def test_an_interrupted_add_leaves_no_run_and_the_next_add_completes(tmp_path, monkeypatch):
    path = tmp_path / "arch"
    store = Archive(path, create=True)
    real_stage = archive_module.Archive._stage

    def failing(self, run, source, add):
        real_stage(self, run, source, add)
        raise OSError("disk full")

    monkeypatch.setattr(archive_module.Archive, "_stage", failing)
    with pytest.raises(OSError):
        store.add(SAMPLES / "mlp")
    assert store.run_ids() == [] and sorted(p.name for p in path.iterdir()) == ["kernelscope-archive.json"]
    monkeypatch.setattr(archive_module.Archive, "_stage", real_stage)
    run_id, added = store.add(SAMPLES / "mlp")
    assert added and store.run_ids() == [run_id]


@pytest.mark.parametrize("folder_there", [False, True])
def test_a_first_add_that_fails_leaves_no_archive(folder_there, tmp_path, monkeypatch):
    """The archive a first add makes (create="on add") goes with that add when it fails or is interrupted after the
    marker is written: no archive holding only its marker and empty folders is left; a folder that was there
    (empty) stays, empty. The next add makes it again and completes."""
    path = tmp_path / "arch"
    if folder_there:
        path.mkdir()
    real_stage = archive_module.Archive._stage

    def interrupted(self, run, source, add):
        real_stage(self, run, source, add)
        raise KeyboardInterrupt

    monkeypatch.setattr(archive_module.Archive, "_stage", interrupted)
    store = Archive(path, create="on add")
    with pytest.raises(KeyboardInterrupt):
        store.add(SAMPLES / "mlp")
    assert (list(path.iterdir()) == []) if folder_there else not path.exists()
    monkeypatch.setattr(archive_module.Archive, "_stage", real_stage)
    run_id, added = store.add(SAMPLES / "mlp")
    assert added and Archive(path).run_ids() == [run_id]


def test_a_failed_first_add_keeps_the_archive_where_another_add_is_in_it(tmp_path, monkeypatch):
    """Another process that started an add in the archive the failed add made (its staging folder there) keeps it,
    marker and all; so does a run another process committed."""
    path = tmp_path / "arch"
    real_stage = archive_module.Archive._stage

    def with_another_add(self, run, source, add):
        real_stage(self, run, source, add)
        (path / ".staging" / "run-000000000000.1.1.000000000000.00000000").mkdir()
        raise OSError("disk full")

    monkeypatch.setattr(archive_module.Archive, "_stage", with_another_add)
    with pytest.raises(OSError):
        archive_runs([SAMPLES / "mlp"], path)
    assert is_archive(path) and Archive(path).run_ids() == []


def test_bad_archives_and_run_names(tmp_path, archived):
    path, ids = archived
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(KernelscopeError, match="exists and is not a kernelscope archive"):
        archive_runs([SAMPLES / "mlp"], tmp_path / "full")
    with pytest.raises(BadInputError, match="is not a kernelscope archive"):
        Archive(tmp_path / "full")
    with pytest.raises(BadInputError, match="missing: does not exist$"):
        Archive(tmp_path / "missing")
    with pytest.raises(BadInputError, match="holds no run 'nope'"):
        Archive(path).run("nope")
    with Archive(path).run(ids["tagged"][:8]) as by_prefix, Archive(path).run("tagged") as by_name:
        assert by_prefix.manifest == by_name.manifest
    with pytest.raises(BadInputError, match="holds no runs yet"):
        Archive(tmp_path / "empty", create=True).sql("SELECT 1")


def test_cli_archive_runs_sql_and_analyze(tmp_path, sources):
    path = tmp_path / "arch"
    first = invoke("archive", sources["run"], sources["job"], "--to", path)
    assert first.exit_code == 0 and first.output.count(": archived") == 2
    again = invoke("archive", sources["run"], "--to", path)
    assert again.exit_code == 0 and "already in the archive, unchanged" in again.output
    listed = invoke("runs", path, "--format", "csv")
    assert listed.exit_code == 0 and len(listed.output.strip().splitlines()) == 3
    newest = invoke("runs", path, "--top-k", "1")  # a table of the newest runs, and what it left out
    (newest_id,) = Archive(path).runs()["run_id"].tail(1)
    oldest_id = Archive(path).runs()["run_id"].iloc[0]
    assert newest.exit_code == 0 and newest_id in newest.output and oldest_id not in newest.output
    assert newest.output.strip().endswith("1 of 2 runs (the newest) shown; --top-k 0 shows all.")
    every = invoke("runs", path, "--top-k", "0")
    assert oldest_id in every.output and newest_id in every.output and "shown" not in every.output
    run_id = Archive(path).resolve("demo")
    across = invoke("sql", path, "SELECT count(DISTINCT run_id) AS n FROM kernels", "--format", "csv")
    assert across.output.splitlines() == ["n", "2"]
    for extra in ([], ["--kernels"], ["--top-k", "3"]):
        from_archive = invoke("analyze", path, "--run", run_id, "--format", "csv", *extra)
        original = invoke("analyze", sources["run"], "--format", "csv", *extra)
        assert from_archive.exit_code == 0 and from_archive.output == original.output
    whole = invoke("analyze", path)
    assert whole.exit_code == 2 and "pick one of its runs with --run" in whole.output
    not_archive = invoke("analyze", sources["run"], "--run", "x")
    assert not_archive.exit_code == 2 and "is not one" in not_archive.output
    trace = json.loads(gzip.decompress(MISC.read_bytes()))
    del trace["baseTimeNanoseconds"]  # relative ts and no base: a trace of no start time
    (tmp_path / "undated.json").write_text(json.dumps(trace))
    bare = invoke("archive", tmp_path / "undated.json", "--to", path)
    assert bare.exit_code == 0 and Archive(path).runs()["start_time"].isna().tolist() == [True, False, False]
    still = invoke("runs", path, "--top-k", "1")  # the newest dated run, not the undated trace
    assert newest_id in still.output and "undated" not in still.output


def test_the_sample_store_the_manifest_names_is_the_one_read_and_archived(tmp_path):
    source = REPO / "sample_traces" / "mlp"
    renamed = tmp_path / "renamed"
    shutil.copytree(source, renamed)
    (renamed / "samples.json").rename(renamed / "other.json")
    manifest = json.loads((renamed / "manifest.json").read_text())
    manifest["files"]["samples"] = "other.json"
    (renamed / "manifest.json").write_text(json.dumps(manifest))
    with load_run(source) as original, load_run(renamed) as run:
        assert run.function_data() == original.function_data() != {}
        pd.testing.assert_frame_equal(run.profiling_df(), original.profiling_df())
    assert archive_module.run_id_of(renamed) != archive_module.run_id_of(source), "it hashes other.json by name"
    [(run_id, added)] = archive_runs([renamed], tmp_path / "archive")
    assert added and run_id == archive_module.run_id_of(renamed)
    with Archive(tmp_path / "archive").run(run_id) as back, load_run(source) as original:
        assert back.function_data() == original.function_data()
        pd.testing.assert_frame_equal(back.sql("SELECT * FROM samples"), original.sql("SELECT * FROM samples"))


@pytest.fixture(scope="module")
def other_archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("other") / "arch"
    archive_runs([SAMPLES / "demo"], path)
    return path


@pytest.mark.parametrize("name", ["g[1]", "a*", "q?", "x=1/arch", "it's"])
def test_an_archive_path_is_never_read_as_a_pattern(name, tmp_path, monkeypatch, other_archive):
    """Glob characters and a folder named like a partition above the archive: the archive reads its own runs only,
    with no extra column. (A leading '~' is the home folder on the command line, as in a shell: tests/test_cli.py.)"""
    monkeypatch.chdir(tmp_path)
    for sibling in ("g1", "ab", "qx", "arch"):  # what the pattern would match instead
        shutil.copytree(other_archive, sibling)
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    listed = invoke("archive", SAMPLES / "mlp", "--to", name)
    assert listed.exit_code == 0, listed.output
    with Archive(name) as store:
        assert store.run_ids() == [archive_module.run_id_of(SAMPLES / "mlp")]
        assert store.sql("SELECT count(*) AS n FROM kernels")["n"][0] == 6
        assert list(store.sql("SELECT * FROM runs").columns[:3]) == ["run_id", "rank", "name"]
        assert "x" not in store.sql("SELECT * FROM kernels").columns, "no column from a folder above the archive"
    assert (tmp_path / name / "kernelscope-archive.json").is_file(), "written where the path says"
    across = invoke("sql", name, "SELECT count(*) AS n FROM kernels", "--format", "csv")
    assert across.output.splitlines() == ["n", "6"]


def test_an_archive_is_made_with_the_umask(tmp_path):
    import os

    old = os.umask(0o027)
    try:
        archive_runs([SAMPLES / "mlp"], tmp_path / "arch")
    finally:
        os.umask(old)
    modes = {p.relative_to(tmp_path).as_posix(): p.stat().st_mode & 0o777 for p in (tmp_path / "arch").rglob("*")}
    folders = {name for name in modes if (tmp_path / name).is_dir()}
    assert {modes[name] for name in folders} == {0o750} and {modes[n] for n in set(modes) - folders} == {0o640}
    assert modes["arch/kernelscope-archive.json"] == 0o640


@pytest.mark.parametrize("made", [False, True], ids=["missing", "an empty folder"])
def test_a_first_run_that_fails_to_load_leaves_no_archive(made, tmp_path):
    """The archive is made by the first add once its run has loaded: a corrupt trace (or one refused for any other
    reason) leaves the path as it was, not an empty archive."""
    bad = tmp_path / "bad.json"
    bad.write_text("[" * 2000 + "]" * 2000)
    path = tmp_path / "arch"
    if made:
        path.mkdir()
    result = invoke("archive", bad, "--to", path)
    assert result.exit_code == 2 and result.stderr.startswith(f"kernelscope: error: {bad}: is not valid JSON"), (
        result.output
    )
    assert (list(path.iterdir()) == []) if made else not path.exists()
    with pytest.raises(BadInputError, match="is not valid JSON"):
        archive_runs([bad], path)
    assert (list(path.iterdir()) == []) if made else not path.exists()
    assert archive_runs([SAMPLES / "mlp"], path)[0][1] and Archive(path).run_ids() == [run_id_of(SAMPLES / "mlp")]


def test_a_saved_archive_database_opens_from_anywhere(tmp_path, monkeypatch):
    """sql ARCHIVE -o FILE.duckdb keeps views over the archive's files by absolute path: the database opens from
    another working directory (a relative archive path in them would break there)."""
    import duckdb

    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    archive_runs([SAMPLES / "mlp"], "arch")
    assert invoke("sql", "arch", "-o", "saved.duckdb").exit_code == 0
    monkeypatch.chdir(tmp_path)
    con = duckdb.connect("work/saved.duckdb", read_only=True)
    assert con.execute("SELECT count(*) FROM kernels").fetchone()[0] == 6
    assert con.execute("SELECT count(DISTINCT run_id) FROM runs").fetchone()[0] == 1
    con.close()


@pytest.mark.parametrize("command", ["archive", "analyze", "sql"])
@pytest.mark.parametrize("option", ["--module-prefix", "--function-prefix"])
def test_an_empty_prefix_is_one_line(command, option, tmp_path):
    extra = {"archive": ["--to", tmp_path / "arch"], "analyze": [], "sql": ["SELECT 1"]}[command]
    result = CliRunner().invoke(main, [command, str(SAMPLES / "mlp"), *map(str, extra), f"{option}="])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"kernelscope: error: {option} must not be empty (leave it out for the run's own prefix)\n"
    assert not (tmp_path / "arch").exists()


def test_a_damaged_archive_is_one_line(tmp_path):
    """A file of a complete run removed by hand: sql and --run, which read it, say so in one line naming the
    archive; runs, which reads only the runs table, lists the run."""
    path = tmp_path / "arch"
    [(run_id, _)] = archive_runs([SAMPLES / "mlp"], path)
    next((path / "kernels").rglob("*.parquet")).unlink()
    listed = CliRunner().invoke(main, ["runs", str(path)])
    assert listed.exit_code == 0 and run_id in listed.stdout, listed.output
    for args in (["sql", path, "SELECT count(*) FROM kernels"], ["analyze", path, "--run", run_id]):
        result = CliRunner().invoke(main, [str(a) for a in args])
        assert result.exit_code == 2 and result.stdout == "", args
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"kernelscope: error: {path}") and "kernels/run_id=" in line, line


@pytest.mark.parametrize(
    ("marker", "problem"),
    [
        (b'{"kernelscope_archive": 2}', "was written by a newer kernelscope (format 2); this one reads up to 1"),
        (b"{}", "is damaged: its kernelscope-archive.json records no format version (an integer kernelscope_archive)"),
        (b'{"kernelscope_archive": true}', "is damaged: its kernelscope-archive.json records no format version"),
        (b'{"kernelscope_archive": "1"}', "is damaged: its kernelscope-archive.json records no format version"),
        (b"not json", "is damaged: its kernelscope-archive.json records no format version"),
        (b"", "is damaged: its kernelscope-archive.json records no format version"),
    ],
    ids=["newer", "no version", "true", "a string", "not JSON", "empty"],
)
def test_an_archive_of_a_newer_format_or_without_one_is_refused_in_one_line(marker, problem, one_run_archive, tmp_path):
    """The marker's format version is read: an archive a newer kernelscope wrote is refused, not misread, and one
    whose marker records no version is damaged; by every command that opens it, adding to it too (nothing written)."""
    base, run_id = one_run_archive
    path = tmp_path / "arch"
    shutil.copytree(base, path)
    (path / "kernelscope-archive.json").write_bytes(marker)
    before = _tree(path)
    for args in (
        ["runs", path],
        ["sql", path, "SELECT count(*) FROM kernels"],
        ["analyze", path, "--run", run_id],
        ["archive", SAMPLES / "demo", "--to", path],
    ):
        result = invoke(*args)
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), (args, result.exception)
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"kernelscope: error: {path}: {problem}"), (args, line)
    assert _tree(path) == before, "nothing written"
    with pytest.raises(BadInputError, match=re.escape(problem)):
        Archive(path)


def test_a_listing_lists_the_committed_runs_once(tmp_path, monkeypatch):
    """Listing the committed ranks is what grows with the archive (two folders per run): once per listing."""
    path = tmp_path / "arch"
    archive_runs([SAMPLES / "mlp"], path)
    listed = []
    counted = archive_module.committed_parts
    monkeypatch.setattr(archive_module, "committed_parts", lambda *a, **k: listed.append(a) or counted(*a, **k))
    with Archive(path) as store:
        assert len(store.runs()) == 1
    assert len(listed) == 1


def _rewrite(table, select):
    """Replace the one file of ``table`` by the rows of ``select`` over it (``{file}``), as Parquet, naming in its
    footer the part it replaces, as an add writes it: a file that lies only where the case says."""

    def change(path):
        import duckdb

        (file,) = (path / table).rglob("*.parquet")
        con = duckdb.connect()
        [(part,)] = con.execute(f"SELECT decode(value) FROM parquet_kv_metadata('{file}')").fetchall()
        source = f"read_parquet({str(file)!r}, hive_partitioning = false)"
        options = f"FORMAT parquet, KV_METADATA {{kernelscope_part: '{part}'}}"
        con.execute(f"COPY ({select.format(file=source)}) TO '{file}.new' ({options})")
        con.close()
        (path / table / file.relative_to(path / table)).with_suffix(".parquet.new").replace(file)

    return change


def _garbage(table, cut=None):
    def change(path):
        (file,) = (path / table).rglob("*.parquet")
        file.write_bytes(file.read_bytes()[:cut] if cut is not None else b"PAR1 not parquet PAR1")

    return change


# name -> (change to a copy of an archive of one run, what the message of analyze --run says after the file it names)
CRAFTED_ARCHIVES = {
    "kernels not Parquet": (_garbage("kernels"), "is damaged: Footer length error in file"),
    "runs cut in half": (_garbage("runs", cut=300), "is damaged: Invalid Input Error: No magic bytes found"),
    "runs without a column": (
        _rewrite("runs", "SELECT * EXCLUDE (module_prefix) FROM {file}"),
        "lacks the column 'module_prefix' of every runs file of an archive (damaged)",
    ),
    "runs without its row": (
        _rewrite("runs", "SELECT * FROM {file} LIMIT 0"),
        "holds 0 rows where the archive recorded one row of its rank; the archive is damaged",
    ),
    "a manifest naming its GPU by a list": (
        _rewrite(
            "runs",
            """SELECT * REPLACE (json_merge_patch(manifest, '{{"gpu_name": [1]}}') AS manifest)
            FROM {file}""",
        ),
        "has gpu_name [1], not a string",
    ),
    "a sample of an unknown tag": (
        _rewrite("samples", """SELECT * REPLACE ('{{"set": [1]}}'::JSON AS args) FROM {file}"""),
        "has a malformed sample of function 'linear' (unknown sample value tag 'set')",
    ),
    "a sample without arguments": (
        _rewrite("samples", "SELECT * REPLACE (NULL::JSON AS args) FROM {file}"),
        "has a malformed sample of function 'linear' (",
    ),
    "kernels without kernel_us": (
        _rewrite("kernels", "SELECT * EXCLUDE (kernel_us) FROM {file}"),
        "lacks the column 'kernel_us' of every kernels file of an archive (damaged)",
    ),
    "kernel_us as text": (
        _rewrite("kernels", "SELECT * REPLACE (CAST(kernel_us AS VARCHAR) AS kernel_us) FROM {file}"),
        "has a column 'kernel_us' of type UTF8, not number (damaged)",
    ),
}


@pytest.fixture(scope="module")
def one_run_archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("crafted") / "arch"
    [(run_id, _)] = archive_runs([SAMPLES / "mlp"], path)
    return path, run_id


@pytest.mark.parametrize("case", CRAFTED_ARCHIVES)
def test_a_crafted_archive_file_is_one_line(case, one_run_archive, tmp_path):
    """A file of a committed run that is not what the archive writes (not Parquet, cut short, without a column the
    analyzer reads, a manifest or sample the analyzer refuses in a run directory): every command that reads it says
    so in one line naming the archive or the file, exit code 2, no traceback."""
    base, run_id = one_run_archive
    path = tmp_path / "arch"
    shutil.copytree(base, path)
    change, problem = CRAFTED_ARCHIVES[case]
    change(path)
    commands = [["analyze", path, "--run", run_id], ["report", path, "--run", run_id, "-o", tmp_path / "r.html"]]
    if case in ("kernels not Parquet", "runs cut in half"):  # a file that no query over the views can read
        commands.append(["sql", path, "SELECT count(*) FROM kernels"])
    for args in commands:
        result = invoke(*args)
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), (args, result.exception)
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"kernelscope: error: {path}") and problem in line, line
    assert not (tmp_path / "r.html").exists()


def test_archive_checks_its_runs_before_it_makes_the_archive(tmp_path):
    """`kernelscope archive add RUN --to A`, the subcommand a user guesses, made an empty archive A and then
    refused 'add'; a mistyped run does not make the archive either."""
    run = SAMPLES / "mlp"
    archive = tmp_path / "archive"
    guessed = CliRunner().invoke(main, ["archive", "add", str(run), "--to", str(archive)])
    assert guessed.exit_code == 2 and not archive.exists()
    assert guessed.stderr.strip() == (
        "kernelscope: error: add: no such run directory or trace file; kernelscope archive takes the runs "
        "themselves: archive RUN... --to DIR"
    )
    missing = CliRunner().invoke(main, ["archive", str(run), str(tmp_path / "nope"), "--to", str(archive)])
    assert missing.exit_code == 2 and not archive.exists(), "nothing added, no archive"
    added = CliRunner().invoke(main, ["archive", str(run), "--to", str(archive)])
    assert added.exit_code == 0 and added.stdout.splitlines()[-1] == f"next: kernelscope runs {archive}"


def test_archive_list_points_to_the_runs_command(tmp_path):
    """`kernelscope archive list A`, the listing a user guesses, read click's bare "Missing option '--to'"."""
    archive = tmp_path / "archive"
    for args in (["list", archive], ["ls", archive, "--to", archive]):
        result = CliRunner().invoke(main, ["archive", *map(str, args)])
        assert result.exit_code == 2 and not archive.exists(), args
        assert f"; kernelscope runs {archive} lists an archive's runs" in result.stderr, args
    bare = CliRunner().invoke(main, ["archive", str(SAMPLES / "mlp")])
    assert bare.exit_code == 2 and "Missing option '--to': the archive to add the runs to (see" in bare.stderr


def _unblocking(fifo, stop, unblocked):
    """Open ``fifo`` for writing whenever a reader waits on it (counted in ``unblocked``), so that a read that
    blocks fails the test instead of hanging it."""
    import os
    import time

    while not stop.is_set():
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            unblocked.append(fifo)
        except OSError:  # no reader yet (ENXIO)
            time.sleep(0.05)


@pytest.mark.parametrize("table", ["events", "kernels", "samples", "runs", "index"])
def test_a_fifo_in_place_of_an_archive_file_is_one_line_not_a_hang(table, one_run_archive, tmp_path):
    """DuckDB's open of a FIFO waits for a writer forever, in a thread that no signal ends: a FIFO in place of a
    committed run's file is refused before it is opened; one in place of the runs index is an index that cannot be
    read, so the run is listed from its own files."""
    import os
    import threading

    base, run_id = one_run_archive
    path = tmp_path / "arch"
    shutil.copytree(base, path)
    if table == "index":
        (path / ".index").mkdir(exist_ok=True)
        fifo = path / ".index" / "runs-99-abc.parquet"
    else:
        fifo = next((path / table).rglob("*.parquet"))
        fifo.unlink()
    os.mkfifo(fifo)
    stop, unblocked = threading.Event(), []
    threading.Thread(target=_unblocking, args=(fifo, stop, unblocked), daemon=True).start()
    try:
        if table == "index":
            listed = invoke("runs", path)
            assert listed.exit_code == 0 and run_id in listed.stdout, listed.output
            counted = invoke("sql", path, "SELECT count(*) AS n FROM runs", "--format", "csv")
            assert counted.exit_code == 0 and counted.stdout == "n\n1\n", counted.output
            assert not unblocked, "the index was opened"
            return
        reads = [["sql", path, f"SELECT count(*) FROM {table}"], ["analyze", path, "--run", run_id]]
        for args in reads + ([["runs", path]] if table == "runs" else []):
            result = invoke(*args)
            assert result.exit_code == 2 and result.stdout == "", (args, result.output)
            assert (
                result.stderr == f"kernelscope: error: {fifo}: is a FIFO, not a regular file (the archive is damaged)\n"
            )
    finally:
        stop.set()


def test_paths_that_are_not_utf8_are_named_in_the_archive_or_refused_before_it_is_made(tmp_path):
    """DuckDB takes UTF-8 strings only: a run folder named in Latin-1 (surrogates in Python) made the add fail, blamed
    on the archive; an archive at such a path cannot be written, and is refused before anything is made there."""
    run = tmp_path / os.fsdecode(b"caf\xe9")
    shutil.copytree(SAMPLES / "mlp", run)
    path = tmp_path / "arch"
    [(run_id, added)] = archive_runs([run], path)
    assert added
    names = Archive(path).sql("SELECT name, source FROM runs")
    assert names.values.tolist() == [["caf\\xe9", str(run.resolve()).replace("\udce9", "\\xe9")]]
    unwritable = tmp_path / os.fsdecode(b"arch\xe9")
    result = invoke("archive", SAMPLES / "mlp", "--to", unwritable)
    assert result.exit_code == 2 and result.stderr.endswith(
        ": is not a UTF-8 path, which DuckDB cannot write an archive at\n"
    )
    assert not os.path.lexists(unwritable)


def test_empty_text_names_no_run_even_in_an_archive_of_one(other_archive):
    with pytest.raises(BadInputError, match="names no run by empty text"):
        Archive(other_archive).run("")
    refused = invoke("analyze", other_archive, "--run", "")
    assert refused.exit_code == 2 and "names no run by empty text" in refused.output
