-- ingest_scanned.sql: append one part of the trace's traceEvents array, read by the native reader
-- (_kineto.c) into the columns of `events` (the rows ingest.sql gives, event_id the position in the part),
-- to `events`; ${first_id}: the events of the parts before it, so event_id is the position in the array; ${rank}:
-- the recording's rank. The columns go in as the reader gives them: it gives a device event without a stream its tid
-- for stream, as ingest.sql does, and a part with a pid or tid written as a string is inserted by
-- ingest_scanned_text_ids.sql instead, which keys them. A rule computed here for every row cost the insert: the
-- stream's and the text keys' CASEs were ~13 % of it (benchmarks/RESULTS.md).
INSERT INTO events
SELECT event_id + CAST(${first_id} AS BIGINT), ph, cat, name, pid, tid, ts_ns, dur_ns, correlation, external_id,
       device, stream, args, flow_id, pid_name, tid_name, CAST(${rank} AS INTEGER)
FROM scanned_part;
