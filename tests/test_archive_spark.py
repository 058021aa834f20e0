"""Spark SQL reads an archive as kernelscope's DuckDB views do: examples/query_archive_with_spark.py's views hold
the same rows per run and rank (and not the files of an unfinished add), and docs/sql.md's examples across runs,
in Spark's dialect, give what they give in DuckDB. One local Spark session for the module, and for
test_docs.py's run of the doc's Spark example; in CI (.ci/run sets KERNELSCOPE_REQUIRE_SPARK) a missing pyspark
or Java is a failure, elsewhere a skip."""

import datetime
import importlib.util
import os
import shutil

import pytest
from conftest import REPO, make_job, tagged_copy
from kernelscope.analyzer import Archive, archive_runs
from test_docs import blocks

SAMPLES = REPO / "sample_traces"
TABLES = ("runs", "events", "kernels", "samples")


def _require(module: str | None, program: str | None = None) -> None:
    missing = (module and importlib.util.find_spec(module) is None) or (program and shutil.which(program) is None)
    if missing:
        what = module if program is None else f"{module} or {program}"
        if os.environ.get("KERNELSCOPE_REQUIRE_SPARK"):
            pytest.fail(f"KERNELSCOPE_REQUIRE_SPARK is set (.ci/run) but {what} is missing")
        pytest.skip(f"no {what} (pip install pyspark; Java 17)")


def _tool():
    spec = importlib.util.spec_from_file_location(
        "query_archive_with_spark", REPO / "examples" / "query_archive_with_spark.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cross_run_examples() -> dict[str, str]:
    """docs/sql.md's SQL examples under "## Archives", by their comment."""
    found = {}
    for block in blocks(REPO / "docs" / "sql.md"):
        if block.lang != "sql" or block.section != "Archives":
            continue
        for statement in block.text.split(";"):
            lines = [line.strip() for line in statement.strip().splitlines()]
            comment = " ".join(line[2:].strip() for line in lines if line.startswith("--"))
            code = "\n".join(line for line in lines if line and not line.startswith("--"))
            if code:
                found[comment] = code
    return found


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spark-archive")
    tagged = tagged_copy(SAMPLES / "demo", tmp / "demo", {"team": "infra"})
    job = make_job(tmp / "job", {0: SAMPLES / "demo", 1: SAMPLES / "threads"})
    archive_runs([tagged, SAMPLES / "unet_block", SAMPLES / "mlp", job], tmp / "archive")
    store = Archive(tmp / "archive")
    for table in TABLES[1:]:  # a killed add's data file, in a partition of a complete run: read by neither engine
        committed = store.files(table)[0]
        shutil.copy(committed, committed.with_name("part-1.2.000000000000.0badcafe.parquet"))
    return tmp / "archive"


@pytest.fixture(scope="module")
def spark(archive):
    _require("pyspark", "java")
    tool = _tool()
    session = tool.local_session()
    tool.register_archive(session, str(archive))
    return session, tool  # left running for docs/sql.md's Spark example (tests/test_docs.py), which gets it


def _value(value):
    if isinstance(value, float):
        return round(value, 6)  # sums in another order
    if isinstance(value, datetime.datetime):  # DuckDB's carry UTC, Spark's are naive, in this process's zone
        return value.astimezone(datetime.timezone.utc)
    if isinstance(value, list | tuple):
        return [_value(v) for v in value]
    return value


def _rows(rows) -> list:
    return sorted(([_value(v) for v in row] for row in rows), key=repr)


def _duckdb(archive, query: str) -> list:
    with Archive(archive) as store:
        return _rows(store.con.execute(query).fetchall())


def test_spark_reads_the_rows_duckdb_reads_per_run_and_rank(spark, archive):
    session, _tool = spark
    with Archive(archive) as store:
        for table in TABLES:
            columns = store.con.execute(f"DESCRIBE {table}").df()["column_name"].tolist()
            assert sorted(session.table(table).columns) == sorted(columns), table
    query = " UNION ALL ".join(
        f"SELECT '{table}' AS t, run_id, rank, count(*) AS n, "
        f"{'sum(kernel_us)' if table in ('kernels', 'runs') else 'NULL'} AS us FROM {table} GROUP BY run_id, rank"
        for table in TABLES
    )
    by_spark, by_duckdb = _rows(session.sql(query).collect()), _duckdb(archive, query)
    assert by_spark == by_duckdb
    job_ranks = [rank for t, run_id, rank, *_ in by_duckdb if t == "runs" and run_id == _job_id(archive)]
    assert job_ranks == [0, 1], "the job's two ranks are compared, each on its own"


def _job_id(archive) -> str:
    with Archive(archive) as store:
        return store.resolve("job")


def test_the_docs_examples_across_runs_give_the_same_rows_in_spark(spark, archive):
    session, tool = spark
    examples = cross_run_examples()
    assert examples.keys() == tool.CROSS_RUN_QUERIES.keys(), "every example of docs/sql.md has its Spark form"
    for comment, query in examples.items():
        expected = _duckdb(archive, query)
        assert expected, f"{comment}: no rows in DuckDB, nothing compared"
        assert _rows(session.sql(tool.CROSS_RUN_QUERIES[comment]).collect()) == expected, comment


def test_the_example_says_how_to_run_it_in_one_line_without_a_traceback(tmp_path):
    """`python examples/query_archive_with_spark.py` without an archive ended in IndexError's traceback, and with a
    folder that is no archive in kernelscope's error's traceback, after starting Spark: each is one line and exit 2,
    before any Spark session."""
    import subprocess
    import sys

    _require("pyspark")
    script = str(REPO / "examples" / "query_archive_with_spark.py")
    for args, line in [
        ([], "usage: query_archive_with_spark.py ARCHIVE"),
        ([str(tmp_path)], f"query_archive_with_spark.py: error: {tmp_path}: is not a kernelscope archive"),
    ]:
        done = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and done.stderr.startswith(line), done.stderr[-2000:]
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr[-2000:]
