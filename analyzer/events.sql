-- events.sql: table `events`, one row per trace event (docs/sql.md). ingest.sql fills it, one part of the
-- trace's traceEvents array at a time (parts load in parallel); event_ids.sql then makes event_id the
-- position in the array. The rank is the recording's (run.py; the inserts write it, so no ALTER adds it later).
CREATE OR REPLACE TABLE events (
    event_id    BIGINT,
    ph          VARCHAR,
    cat         VARCHAR,
    name        VARCHAR,
    pid         BIGINT,
    tid         BIGINT,
    ts_ns       BIGINT,
    dur_ns      BIGINT,
    correlation BIGINT,
    external_id BIGINT,
    device      INTEGER,
    stream      INTEGER,
    args        JSON,
    flow_id     BIGINT,
    pid_name    VARCHAR,
    tid_name    VARCHAR,
    rank        INTEGER
);
