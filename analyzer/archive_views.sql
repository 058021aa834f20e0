-- archive_views.sql: the tables of an archive, across runs and ranks, as views over its Parquet files
-- (hive partitions run_id=…/rank=…, read with fixed types so that no engine guesses them).
CREATE OR REPLACE VIEW runs AS
SELECT run_id, rank, * EXCLUDE (run_id, rank)
FROM read_parquet(${runs}, hive_partitioning = true, hive_types = {'run_id': VARCHAR, 'rank': INTEGER});

CREATE OR REPLACE VIEW events AS
SELECT run_id, rank, * EXCLUDE (run_id, rank)
FROM read_parquet(${events}, hive_partitioning = true, hive_types = {'run_id': VARCHAR, 'rank': INTEGER});

CREATE OR REPLACE VIEW kernels AS
SELECT run_id, rank, * EXCLUDE (run_id, rank)
FROM read_parquet(${kernels}, hive_partitioning = true, hive_types = {'run_id': VARCHAR, 'rank': INTEGER});

CREATE OR REPLACE VIEW samples AS
SELECT run_id, rank, * EXCLUDE (run_id, rank)
FROM read_parquet(${samples}, hive_partitioning = true, hive_types = {'run_id': VARCHAR, 'rank': INTEGER});
