-- connection.sql: the join settings attribution.sql needs, which every run's connection is made with (connection.py),
-- before anything is loaded.
-- DuckDB 2.0 plans small range joins with equality conditions as merge joins it cannot run ("Unimplemented join
-- type for merge join"), hence merge_join_threshold = 0; prefer_range_joins gets the containment joins of
-- attribution.sql planned as IEJoins.
SET prefer_range_joins = true;
SET merge_join_threshold = 0;
