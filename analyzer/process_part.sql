-- process_part.sql: table `events` of one process of a pasted file (process_parts.sql's ks_pasted_events), its rank
-- the file's plus the process's number (an INTEGER, as every table's rank: pasted.py refuses a sum past it), in the
-- order of the file.
CREATE OR REPLACE TABLE events AS
SELECT * EXCLUDE (process) REPLACE (CAST(rank + process AS INTEGER) AS rank)
FROM ks_pasted_events
WHERE process = CAST(${process} AS INTEGER)
ORDER BY event_id
