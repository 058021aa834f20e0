-- ingest_scanned.sql: append one part of the trace's traceEvents array, read by the native reader
-- (_kineto.c) into the columns of `events` (the rows ingest.sql gives, event_id the position in the part),
-- to `events`; ${first_id}: the events of the parts before it, so event_id is the position in the array; ${rank}:
-- the recording's rank.
INSERT INTO events
SELECT event_id + CAST(${first_id} AS BIGINT), ph, cat, name, pid, tid, ts_ns, dur_ns, correlation, external_id,
       device, stream, args, flow_id, pid_name, tid_name, CAST(${rank} AS INTEGER)
FROM scanned_part;
