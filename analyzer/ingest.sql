-- ingest.sql: append one part of the trace's traceEvents array (a file holding a JSON array of consecutive
-- events) to `events`. event_id is ${first_id} + the position in the part (event_ids.sql renumbers).
-- ts/dur are read as exact decimals and stored as integer nanoseconds, so containment tests are exact
-- (whole microseconds and the 3 decimals apart: no 128-bit decimal arithmetic).
-- pid/tid that are strings in the trace ("Spans", "Traces") become NULL; the full args stay as JSON, and
-- the four args the attribution joins on come from one parse of them (json_transform: the same values as
-- TRY_CAST(json_extract(args, path)) of each, in one pass instead of four).
INSERT INTO events
SELECT
    CAST(${first_id} AS BIGINT) + (row_number() OVER ()) - 1                                AS event_id,
    ph,
    cat,
    name,
    TRY_CAST(pid AS BIGINT)                                                                 AS pid,
    TRY_CAST(tid AS BIGINT)                                                                 AS tid,
    CAST(trunc(ts) AS BIGINT) * 1000 + CAST(CAST(ts - trunc(ts) AS DECIMAL(4, 3)) * 1000 AS BIGINT)    AS ts_ns,
    CAST(trunc(dur) AS BIGINT) * 1000 + CAST(CAST(dur - trunc(dur) AS DECIMAL(4, 3)) * 1000 AS BIGINT) AS dur_ns,
    keys.correlation                                                                        AS correlation,
    keys."External id"                                                                      AS external_id,
    keys.device                                                                             AS device,
    keys.stream                                                                             AS stream,
    args
FROM (
    SELECT *, json_transform(args, '{"correlation": "BIGINT", "External id": "BIGINT", "device": "INTEGER", "stream": "INTEGER"}') AS keys
    FROM read_json(
        ${events_file},
        format = 'array',
        columns = {ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', pid: 'JSON', tid: 'JSON',
                   ts: 'DECIMAL(18,3)', dur: 'DECIMAL(18,3)', args: 'JSON'}
    )
);
