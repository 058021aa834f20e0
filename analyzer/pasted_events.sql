-- pasted_events.sql: table `events` of a whole pasted file again (ks_pasted_events, pasted.py), once each process's
-- copy (process_part.sql) is attributed: each event of its process's rank, the file's plus the process's number. The
-- rows are ranked where they lie, not copied: a copy would hold the file's events twice for a moment.
UPDATE ks_pasted_events AS e SET rank = CAST(e.rank + CAST(p.process AS BIGINT) AS INTEGER)
FROM ks_process_of_event AS p
WHERE p.event_id = e.event_id AND p.process > 0;

DROP TABLE ks_process_of_event;

ALTER TABLE ks_pasted_events RENAME TO events
