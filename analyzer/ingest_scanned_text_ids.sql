-- ingest_scanned_text_ids.sql: ingest_scanned.sql for a part that holds a pid or tid written as a string (the native
-- reader's fact TEXT_IDS; pid_name and tid_name hold them, pid and tid are then NULL): keyed as in ingest.sql, the
-- text of an integer as that integer, any other text by its hash, kept in pid_name/tid_name. Each rule is a CASE whose
-- first branch takes the usual row (an integer pid/tid), so the tests on text run only on the rows that hold text.
INSERT INTO events
SELECT event_id + CAST(${first_id} AS BIGINT), ph, cat, name,
       CASE WHEN pid_name IS NULL THEN pid
            WHEN CAST(TRY_CAST(pid_name AS BIGINT) AS VARCHAR) = pid_name THEN CAST(pid_name AS BIGINT)
            ELSE -4611686018427387904 - CAST(hash(pid_name) % 4611686018427387904 AS BIGINT) END,
       CASE WHEN tid_name IS NULL THEN tid
            WHEN CAST(TRY_CAST(tid_name AS BIGINT) AS VARCHAR) = tid_name THEN CAST(tid_name AS BIGINT)
            ELSE -4611686018427387904 - CAST(hash(tid_name) % 4611686018427387904 AS BIGINT) END,
       ts_ns, dur_ns, correlation, external_id, device, stream, args, flow_id,
       CASE WHEN pid_name IS NOT NULL AND NOT coalesce(CAST(TRY_CAST(pid_name AS BIGINT) AS VARCHAR) = pid_name, false)
            THEN pid_name END,
       CASE WHEN tid_name IS NOT NULL AND NOT coalesce(CAST(TRY_CAST(tid_name AS BIGINT) AS VARCHAR) = tid_name, false)
            THEN tid_name END,
       CAST(${rank} AS INTEGER)
FROM scanned_part;
