"""Read a kernelscope archive with Spark SQL in local mode, without any conversion (docs/sql.md).

    pip install pyspark            # and Java 17
    python .ci/read_archive_with_spark.py ARCHIVE

Registers runs, events, kernels and samples as views (run_id and rank come from the hive partitions),
checks that Spark sees the rows DuckDB sees, and prints the device time per run and rank. Not part of CI:
Spark's start-up alone would take a good part of the test budget.
"""

import sys

import duckdb
from pyspark.sql import SparkSession

TABLES = ("runs", "events", "kernels", "samples")


def main(archive: str) -> None:
    spark = SparkSession.builder.master("local[2]").appName("kernelscope-archive").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for table in TABLES:
            spark.read.parquet(f"{archive}/{table}").createOrReplaceTempView(table)
            seen = spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0]
            query = f"SELECT count(*) FROM read_parquet('{archive}/{table}/*/*/*.parquet')"
            expected = duckdb.connect().execute(query).fetchone()[0]
            assert seen == expected, f"{table}: Spark reads {seen} rows, DuckDB {expected}"
            print(f"{table}: {seen} rows")
        spark.sql(
            "SELECT r.name, k.run_id, k.rank, count(*) AS kernels, round(sum(k.kernel_us), 3) AS kernel_us "
            "FROM kernels k JOIN runs r ON r.run_id = k.run_id AND r.rank = k.rank "
            "GROUP BY r.name, k.run_id, k.rank ORDER BY r.name, k.rank"
        ).show(truncate=False)
        spark.sql("DESCRIBE kernels").show(40, truncate=False)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
