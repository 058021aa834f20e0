-- archive_view.sql: one table of an archive, over the files of its committed runs (${files}: a list of absolute
-- paths ending in <table>/run_id=<id>/rank=<rank>/part-<token>.parquet, their glob characters escaped). The run
-- id and rank come from those last folders only, so a folder above the archive named like a partition (x=1)
-- adds no column. union_by_name: a run archived by an older kernelscope lacks the newer columns
-- (kernels.call_event_id), NULL there; ${union}: false where the files are known to share one schema (the runs
-- index says so), which spares reading every file's footer before the query; ${options}: more read_parquet
-- options (file_row_number).
SELECT
    regexp_extract(filename, '/run_id=([^/]+)/rank=[0-9]+/[^/]+$$', 1)                  AS run_id,
    CAST(regexp_extract(filename, '/rank=([0-9]+)/[^/]+$$', 1) AS INTEGER)            AS rank,
    * EXCLUDE (filename)
FROM read_parquet(${files}, filename = true, hive_partitioning = false, union_by_name = ${union}${options})
