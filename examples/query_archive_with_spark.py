"""Query a kernelscope archive with Spark SQL, without any conversion (docs/sql.md, "Other engines").

    pip install pyspark            # and Java 17
    python examples/query_archive_with_spark.py ARCHIVE

Registers the archive's tables runs, events, kernels and samples as Spark views over the files of its
complete runs (run_id and rank come from the hive partitions), then runs docs/sql.md's examples across runs in
Spark's dialect (CROSS_RUN_QUERIES) and prints their results. tests/test_archive_spark.py checks that each gives
what its DuckDB form gives.
"""

from __future__ import annotations

import sys

from kernelscope.analyzer import Archive
from pyspark.sql import SparkSession

TABLES = ("runs", "events", "kernels", "samples")

# docs/sql.md's "Examples across runs", each under its comment there, in Spark's dialect: get_json_object for
# DuckDB's ->> and ->, from_json to make a JSON array a typed one.
CROSS_RUN_QUERIES = {
    "total device time per run, newest first, with where and what it ran on": """
        SELECT r.run_id, r.name, r.start_time, r.gpu_name, r.git_commit, sum(k.kernel_us) AS us
        FROM kernels k JOIN runs r USING (run_id, rank) GROUP BY ALL ORDER BY r.start_time DESC""",
    "linear's time per run, for the runs tagged team=infra": """
        SELECT r.name, sum(k.kernel_us) AS us FROM kernels k JOIN runs r USING (run_id, rank)
        WHERE k.function_name = 'linear' AND get_json_object(r.tags, '$.team') = 'infra' GROUP BY ALL""",
    "the shapes of the slowest conv2d calls across runs, from the stored arguments": """
        SELECT r.name, s.signature,
               from_json(get_json_object(s.args, '$.tuple[0].tensor.shape'), 'array<int>') AS input_shape,
               sum(k.kernel_us) / s.calls AS us_per_call
        FROM samples s JOIN kernels k USING (run_id, rank, function_name, sample_id) JOIN runs r USING (run_id, rank)
        WHERE s.function_name = 'conv2d' GROUP BY r.name, s.signature, input_shape, s.calls
        ORDER BY us_per_call DESC LIMIT 10""",
}


def local_session() -> SparkSession:
    """A Spark session on this machine's cores, times in UTC as kernelscope prints them; few shuffle partitions,
    since an archive's tables are small next to what Spark's default of 200 is for."""
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kernelscope-archive")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def register_archive(spark: SparkSession, path: str) -> None:
    """The views runs, events, kernels and samples over the files of the archive's complete runs (an add in
    progress, or one that was killed, has files in the folders that are not read); mergeSchema: a run archived
    by an older kernelscope lacks the newer columns, NULL there."""
    archive = Archive(path)
    for table in TABLES:
        files = [str(file) for file in archive.files(table)]
        frame = spark.read.option("basePath", str(archive.root / table)).option("mergeSchema", "true").parquet(*files)
        frame.createOrReplaceTempView(table)


def main(path: str) -> None:
    Archive(path)  # a folder that is no archive is refused before Spark starts
    spark = local_session()
    try:
        register_archive(spark, path)
        for comment, query in CROSS_RUN_QUERIES.items():
            print(f"-- {comment}")
            spark.sql(query).show(truncate=False)
    finally:
        spark.stop()


if __name__ == "__main__":
    from kernelscope.analyzer import KernelscopeError

    if len(sys.argv) != 2:
        print("usage: query_archive_with_spark.py ARCHIVE  (an archive kernelscope archive wrote)", file=sys.stderr)
        sys.exit(2)
    try:
        main(sys.argv[1])
    except KernelscopeError as exc:
        print(f"query_archive_with_spark.py: error: {exc}", file=sys.stderr)
        sys.exit(2)
