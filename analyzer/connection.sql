-- connection.sql: the join settings attribution.sql needs, which every run's connection has: set for its whole
-- instance when the instance is made (connection.py), so that a connection leased on it needs no statement of its own.
-- DuckDB 2.0 plans small range joins with equality conditions as merge joins it cannot run ("Unimplemented join
-- type for merge join"), hence merge_join_threshold = 0; prefer_range_joins gets the containment joins of
-- attribution.sql planned as IEJoins.
SET GLOBAL prefer_range_joins = true;
SET GLOBAL merge_join_threshold = 0;
