-- thread_keys.sql: a pid or tid written as a string (pid_name, tid_name: "python", "stream 7", "7"; Chrome takes any
-- value there) gets a key of its own, so that its events share a thread as those of an integer pid or tid do: each
-- distinct string, in order of text, the next key below every integer of its column and below 0. A name is never
-- read as a number: "7" and 7 are two threads, as they are two values. Keys are given afresh over the whole table,
-- so a rank loaded later keeps them distinct too (ingest.py runs this after every load). No guard: every Kineto
-- trace names a few threads ("Spans", "Traces"), and each statement costs a few milliseconds.
UPDATE events SET pid = keys.key
FROM (SELECT pid_name,
             least(0, (SELECT min(pid) FROM events WHERE pid_name IS NULL)) - dense_rank() OVER (ORDER BY pid_name) AS key
      FROM (SELECT DISTINCT pid_name FROM events WHERE pid_name IS NOT NULL)) AS keys
WHERE events.pid_name = keys.pid_name;

UPDATE events SET tid = keys.key
FROM (SELECT tid_name,
             least(0, (SELECT min(tid) FROM events WHERE tid_name IS NULL)) - dense_rank() OVER (ORDER BY tid_name) AS key
      FROM (SELECT DISTINCT tid_name FROM events WHERE tid_name IS NOT NULL)) AS keys
WHERE events.tid_name = keys.tid_name;
