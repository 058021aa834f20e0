"""Archive files whose footers lie (analyzer/archive_verify.py): a part of a committed run with columns added,
dropped or retyped, rows added or removed, a footer counting more rows than the file holds, swapped with another
run's file, or replaced by a link. Each was read as if true (counts and sums changed, or a query's error blamed
the user's SQL); now every command that reads it names the file in one line, exit code 2, and writes nothing."""

from __future__ import annotations

import gzip
import os
import shutil

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.analyzer import Archive, archive_index, archive_runs
from kernelscope.analyzer.archive_verify import COLUMNS, OLDER, PART_KEY, kind
from kernelscope.cli import main
from parquet_footers import row_count_lie, statistics_lie

SAMPLES = REPO / "sample_traces"
DATA = ("events", "kernels", "samples")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def tree(path):
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """Two runs of the same kernels: mlp's run directory, and its trace alone (as many kernels, another id)."""
    tmp = tmp_path_factory.mktemp("verify")
    trace = tmp / "mlp.json"
    trace.write_bytes(gzip.decompress((SAMPLES / "mlp" / "trace.json.gz").read_bytes()))
    added = archive_runs([SAMPLES / "mlp", trace], tmp / "arch")
    return tmp / "arch", [run_id for run_id, _ in added]


@pytest.fixture
def arch(base, tmp_path):
    path = tmp_path / "arch"
    shutil.copytree(base[0], path)
    return path


def part_of(arch, table, run_id):
    (file,) = (arch / table / f"run_id={run_id}").rglob("*.parquet")
    return file


def rewrite(file, select: str) -> None:
    """``file`` replaced by the rows of ``select`` over it (``{file}``), its footer naming the part it names now."""
    with duckdb.connect() as con:
        named = con.execute(f"SELECT decode(value) FROM parquet_kv_metadata('{file}')").fetchall()
        source = f"read_parquet('{file}', hive_partitioning = false)"
        options = "FORMAT parquet" + "".join(f", KV_METADATA {{{PART_KEY}: '{part}'}}" for (part,) in named)
        con.execute(f"COPY ({select.format(file=source)}) TO '{file}.new' ({options})")
    os.replace(f"{file}.new", file)


def _with_key(file, value: str) -> None:
    """``file`` rewritten with ``value`` (SQL of a BLOB) as the part its footer names."""
    with duckdb.connect() as con:
        source = f"read_parquet('{file}', hive_partitioning = false)"
        con.execute(
            f"COPY (SELECT * FROM {source}) TO '{file}.new' (FORMAT parquet, KV_METADATA {{{PART_KEY}: {value}}})"
        )
    os.replace(f"{file}.new", file)


def _column_twice(file) -> None:
    """``file`` rewritten by pyarrow with its first column repeated at the end (DuckDB's COPY renames a repeat)."""
    table = pq.read_table(file)
    first = table.column_names[0]
    table = pa.Table.from_arrays([*table.columns, table.column(0)], names=[*table.column_names, first])
    pq.write_table(table.replace_schema_metadata(pq.read_schema(file).metadata), file)


def _first_column(table):
    return next(iter(COLUMNS[table]))


def _retyped(table):
    column = _first_column(table)
    other = "VARCHAR" if COLUMNS[table][column] == "number" else "BLOB"
    return f"SELECT * REPLACE (CAST({column} AS {other}) AS {column}) FROM {{file}}"


LIES = {
    "a column added": lambda file, table, other: rewrite(file, "SELECT *, 1 AS injected FROM {file}"),
    "a column dropped": lambda file, table, other: rewrite(
        file, f"SELECT * EXCLUDE ({_first_column(table)}) FROM {{file}}"
    ),
    "a column retyped": lambda file, table, other: rewrite(file, _retyped(table)),
    "its rows twice": lambda file, table, other: rewrite(file, "SELECT * FROM {file} UNION ALL SELECT * FROM {file}"),
    "a row lost": lambda file, table, other: rewrite(
        file, "SELECT * FROM {file} LIMIT (SELECT count(*) - 1 FROM {file})"
    ),
    "a footer counting 1000x its rows": lambda file, table, other: row_count_lie(file),
    "a column twice": lambda file, table, other: _column_twice(file),
    "a part key not UTF-8": lambda file, table, other: _with_key(file, "'\\xFF\\xFE'::BLOB"),
    "another run's file": lambda file, table, other: shutil.copyfile(other, file),
    "a link to another run's file": lambda file, table, other: (file.unlink(), file.symlink_to(other)),
}
PROBLEMS = {
    "a column added": "has a column 'injected' that no",
    "a column dropped": "lacks the column",
    "a column retyped": "of type ",
    "its rows twice": "rows where the archive recorded",
    "a row lost": "rows where the archive recorded",
    "a footer counting 1000x its rows": "rows where the archive recorded",
    "a column twice": "twice (the archive is damaged)",
    "a part key not UTF-8": "names the part '\\xff\\xfe', not",
    "another run's file": "names the part",  # samples: the trace's run holds none, so its count tells first
    "a link to another run's file": "is a symbolic link",
}


@pytest.mark.parametrize("table", [*DATA, "runs"])
@pytest.mark.parametrize("lie", LIES)
def test_a_lying_part_is_refused_by_every_command_in_one_line_naming_it(lie, table, base, arch, tmp_path):
    """The part of the run directory's run lies: analyze --run, sql over its table (and runs, for the runs table)
    each exit 2 with one line naming that file, an add to the archive too, and nothing in the archive changes.
    Before: sql summed the lie, or failed naming no file; analyze read the swapped file as the run's; add added."""
    run_id, other_id = base[1]  # the run directory's part lies (its trace's run has no samples)
    if lie == "a row lost" and table == "runs":
        pytest.skip("the runs file's one row lost is test_archive.py's 'runs without its row'")
    file = part_of(arch, table, run_id)
    other = part_of(arch, table, other_id)
    if lie in ("another run's file", "a link to another run's file") and table in ("events", "kernels"):
        assert (
            duckdb.execute(f"SELECT count(*) FROM '{other}'").fetchall()
            == duckdb.execute(f"SELECT count(*) FROM '{file}'").fetchall()
        ), "the swap keeps the count: only the footer's part tells the file apart"
    LIES[lie](file, table, other)
    before = tree(arch)
    commands = [("analyze", arch, "--run", run_id), ("sql", arch, f"SELECT count(*) FROM {table}")]
    commands += [("runs", arch)] * (table == "runs") + [("archive", SAMPLES / "threads", "--to", arch)]
    for args in commands:
        result = invoke(*args)
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), (args, result.output)
        (line,) = result.stderr.strip().splitlines()
        problem = (
            "rows where the archive recorded" if (table, lie) == ("samples", "another run's file") else PROBLEMS[lie]
        )
        assert line.startswith(f"kernelscope: error: {file}: ") and problem in line, (args, line)
        assert "Traceback" not in result.output
    assert tree(arch) == before


def test_what_an_add_writes_has_the_columns_the_reader_checks(base):
    """COLUMNS, the reader's list, is what an add writes: every column of every file of both runs, of its kind."""
    arch, _ = base
    for table, wanted in COLUMNS.items():
        for file in (arch / table).rglob("*.parquet"):
            rows = duckdb.execute(
                f"SELECT name, type, converted_type, num_children FROM parquet_schema('{file}')"
            ).fetchall()
            top, skip = {}, 0
            for name, physical, converted, children in rows[1:]:  # the root first; a list's two levels after it
                if skip:
                    skip -= 1
                    continue
                top[name] = kind(physical, converted)
                skip = 2 if converted == "LIST" else 0
            if duckdb.execute(f"SELECT num_rows FROM parquet_file_metadata('{file}')").fetchall()[0][0]:
                assert top == wanted, (table, file)
            assert set(top) == set(wanted), table
    assert all(OLDER[table] <= set(COLUMNS[table]) for table in COLUMNS)


def test_an_archive_of_unchanged_files_reads_with_every_command(base):
    arch, ids = base
    with Archive(arch) as store:
        counts = store.sql("SELECT run_id, count(*) AS n FROM kernels GROUP BY 1 ORDER BY 1")
        assert counts["n"].tolist() == [6, 6]
        for run_id in ids:
            with store.run(run_id) as run:
                assert len(run.con.execute("SELECT * FROM kernels").fetchall()) == 6


def test_statistics_that_lie_are_not_believed(base, arch):
    """A kernels part whose footer says its largest kernel_us is its smallest: DuckDB skipped the row group for
    kernel_us above that and answered max() from the footer (0 rows, and that max, before); the archive's reads
    believe no statistics."""
    run_id = base[1][0]
    with Archive(arch) as store:
        [(low, top)] = store.sql(f"SELECT min(kernel_us), max(kernel_us) FROM kernels WHERE run_id = '{run_id}'").values
        query = (
            f"SELECT count(*) AS n, max(kernel_us) AS top FROM kernels WHERE kernel_us > {low} AND run_id = '{run_id}'"
        )
        truth = store.sql(query)
    assert truth["n"][0] > 0 and low < top
    assert statistics_lie(part_of(arch, "kernels", run_id), top, low) >= 1
    with Archive(arch) as store:
        assert store.sql(query).equals(truth)
        assert store.sql(f"SELECT max(kernel_us) AS top FROM kernels WHERE run_id = '{run_id}'")["top"][0] == top
    with Archive(arch).run(run_id) as run:
        assert run.con.execute(f"SELECT count(*), max(kernel_us) FROM kernels WHERE kernel_us > {low}").fetchone() == (
            truth["n"][0],
            top,
        )


@pytest.fixture(scope="module")
def indexed(base, tmp_path_factory):
    """The two runs with a runs index that holds both (written after each add)."""
    path = tmp_path_factory.mktemp("indexed") / "arch"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(archive_index, "INDEX_EVERY", 1)
        archive_runs([SAMPLES / "mlp", base[0].parent / "mlp.json"], path)
    assert list((path / archive_index.INDEX).iterdir())
    return path


def test_a_file_the_index_holds_is_checked_again_once_it_changed(indexed, tmp_path):
    """The index spares a reader the footers of the files it holds while each has the size and mtime it recorded: a
    file swapped in (a new mtime) is read and refused; an archive copied without its mtimes reads whole."""
    copied = tmp_path / "copied"
    shutil.copytree(indexed, copied, copy_function=shutil.copy)  # new mtimes: every file is checked from its footer
    with Archive(copied) as store:
        assert store.sql("SELECT count(*) AS n FROM kernels")["n"][0] == 12
    swapped = tmp_path / "swapped"
    shutil.copytree(indexed, swapped)
    ids = sorted(p.name[len("run_id=") :] for p in (swapped / "runs").iterdir())
    file = part_of(swapped, "kernels", ids[0])
    shutil.copyfile(part_of(swapped, "kernels", ids[1]), file)
    result = invoke("sql", swapped, "SELECT count(*) FROM kernels")
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"kernelscope: error: {file}: names the part "), line


def test_an_index_superseded_while_the_parts_are_checked_is_read_again(indexed, tmp_path, monkeypatch):
    """An add that writes a newer index removes the one a reader listed: where that happens while the reader checks
    the parts (between its listing and its views), it opens the archive again rather than call it damaged."""
    from kernelscope.analyzer import archive_verify as verify_module

    copy = tmp_path / "superseded"
    shutil.copytree(indexed, copy)
    original = verify_module.recorded_rows

    def superseding(con, runs):
        for index in (copy / archive_index.INDEX).iterdir():  # as an add does: a newer one in, the old one out
            newer = index.name.split("-", 2)
            shutil.copy(index, index.with_name(f"runs-{int(newer[1]) + 1}-{newer[2]}"))
            index.unlink()
        monkeypatch.setattr(verify_module, "recorded_rows", original)
        return original(con, runs)

    monkeypatch.setattr(verify_module, "recorded_rows", superseding)
    with Archive(copy) as store:
        assert store.sql("SELECT count(*) AS n FROM kernels")["n"][0] == 12
