-- thread_keys.sql: a pid or tid written as a string (pid_name, tid_name: "python", "stream 7", "7"; Chrome takes any
-- value there) gets a key of its own, so that its events share a thread as those of an integer pid or tid do: each
-- distinct string, in order of text, the next key below every integer of its column and below 0. A name is never
-- read as a number: "7" and 7 are two threads, as they are two values. Keys are given afresh over the whole table,
-- so a rank loaded later keeps them distinct too (ingest.py runs this after every load). No guard: every Kineto
-- trace names a few threads ("Spans", "Traces"), and one statement for both columns (two cost 1 ms more on a small trace).
UPDATE events SET pid = coalesce(keys.pid_key, events.pid), tid = coalesce(keys.tid_key, events.tid)
FROM (SELECT pid_name, tid_name,
             CASE WHEN pid_name IS NOT NULL THEN least(0, (SELECT min(pid) FROM events WHERE pid_name IS NULL))
                  - dense_rank() OVER (PARTITION BY pid_name IS NULL ORDER BY pid_name) END AS pid_key,
             CASE WHEN tid_name IS NOT NULL THEN least(0, (SELECT min(tid) FROM events WHERE tid_name IS NULL))
                  - dense_rank() OVER (PARTITION BY tid_name IS NULL ORDER BY tid_name) END AS tid_key
      FROM (SELECT DISTINCT pid_name, tid_name FROM events WHERE pid_name IS NOT NULL OR tid_name IS NOT NULL)) AS keys
WHERE events.pid_name IS NOT DISTINCT FROM keys.pid_name AND events.tid_name IS NOT DISTINCT FROM keys.tid_name;
