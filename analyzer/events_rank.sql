-- events_rank.sql: give every row of `events` rank ${rank}: the rank a bare trace's header names (distributedInfo),
-- known only once the trace is read, where it is not the rank the ingest wrote (run.py). Replacing the column
-- costs what adding it costs, not an update of every row.
ALTER TABLE events DROP COLUMN rank;
ALTER TABLE events ADD COLUMN rank INTEGER DEFAULT ${rank};
ALTER TABLE events ALTER COLUMN rank DROP DEFAULT;
