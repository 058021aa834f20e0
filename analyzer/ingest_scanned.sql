-- ingest_scanned.sql: append one part of the trace's traceEvents array, read by the native reader
-- (_kineto.c) into the columns of `events` (the rows ingest.sql gives), to `events`.
INSERT INTO events
SELECT event_id, ph, cat, name, pid, tid, ts_ns, dur_ns, correlation, external_id, device, stream, args
FROM scanned_part;
