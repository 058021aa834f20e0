-- ingest_scanned.sql: append one part of the trace's traceEvents array, read by the native reader
-- (_kineto.c) into the columns of `events` (the rows ingest.sql gives, event_id the position in the part),
-- to `events`; ${first_id}: the events of the parts before it, so event_id is the position in the array; ${rank}:
-- the recording's rank. A pid/tid the trace wrote as a string is keyed as in ingest.sql: the text of an integer as
-- that integer, any other text by its hash. A device event without a stream has its tid for stream, where the trace
-- wrote the tid as an integer (as ingest.sql says). Each rule is a CASE whose first branch takes the usual row (an
-- integer pid/tid, a stream given), so the tests on text run only on the rows that hold text: computed for every
-- row, they were a fifth of the insert's cost (benchmarks/RESULTS.md).
INSERT INTO events
SELECT event_id + CAST(${first_id} AS BIGINT), ph, cat, name,
       CASE WHEN pid_name IS NULL THEN pid
            WHEN CAST(TRY_CAST(pid_name AS BIGINT) AS VARCHAR) = pid_name THEN CAST(pid_name AS BIGINT)
            ELSE -4611686018427387904 - CAST(hash(pid_name) % 4611686018427387904 AS BIGINT) END,
       CASE WHEN tid_name IS NULL THEN tid
            WHEN CAST(TRY_CAST(tid_name AS BIGINT) AS VARCHAR) = tid_name THEN CAST(tid_name AS BIGINT)
            ELSE -4611686018427387904 - CAST(hash(tid_name) % 4611686018427387904 AS BIGINT) END,
       ts_ns, dur_ns, correlation, external_id, device,
       CASE WHEN stream IS NOT NULL THEN stream
            WHEN tid_name IS NULL AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') THEN TRY_CAST(tid AS INTEGER) END,
       args, flow_id,
       CASE WHEN pid_name IS NOT NULL AND NOT coalesce(CAST(TRY_CAST(pid_name AS BIGINT) AS VARCHAR) = pid_name, false)
            THEN pid_name END,
       CASE WHEN tid_name IS NOT NULL AND NOT coalesce(CAST(TRY_CAST(tid_name AS BIGINT) AS VARCHAR) = tid_name, false)
            THEN tid_name END,
       CAST(${rank} AS INTEGER)
FROM scanned_part;
