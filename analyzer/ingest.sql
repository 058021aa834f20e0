-- ingest.sql: the trace's events as one narrow table.
-- ts/dur are read as exact decimals and stored as integer nanoseconds, so containment tests are exact.
-- pid/tid that are strings in the trace ("Spans", "Traces") become NULL; the full args stay as JSON.
CREATE OR REPLACE TABLE events AS
SELECT
    (row_number() OVER ()) - 1                                  AS event_id,
    ph,
    cat,
    name,
    TRY_CAST(pid AS BIGINT)                                     AS pid,
    TRY_CAST(tid AS BIGINT)                                     AS tid,
    CAST(CAST(ts AS DECIMAL(21,3)) * 1000 AS BIGINT)                          AS ts_ns,
    CAST(CAST(dur AS DECIMAL(21,3)) * 1000 AS BIGINT)                          AS dur_ns,
    TRY_CAST(json_extract(args, '$.correlation') AS BIGINT)     AS correlation,
    TRY_CAST(json_extract(args, '$."External id"') AS BIGINT)   AS external_id,
    TRY_CAST(json_extract(args, '$.device') AS INTEGER)         AS device,
    TRY_CAST(json_extract(args, '$.stream') AS INTEGER)         AS stream,
    args
FROM read_json(
    ${events_file},
    format = 'array',
    columns = {ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', pid: 'JSON', tid: 'JSON',
               ts: 'DECIMAL(18,3)', dur: 'DECIMAL(18,3)', args: 'JSON'}
);
