-- process_part.sql: table `events` of one process of a pasted file (process_parts.sql's ks_process_of_event), its
-- rank the file's plus the process's number (an INTEGER, as every table's rank: pasted.py refuses a sum past it), in
-- the order of the file. A copy of that process's rows alone: the file's stay in ks_pasted_events (pasted_events.sql).
CREATE OR REPLACE TABLE events AS
SELECT * REPLACE (CAST(rank + CAST(${process} AS BIGINT) AS INTEGER) AS rank)
FROM ks_pasted_events
WHERE event_id IN (SELECT event_id FROM ks_process_of_event WHERE process = CAST(${process} AS INTEGER))
ORDER BY event_id
