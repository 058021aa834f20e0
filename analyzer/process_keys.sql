-- process_keys.sql: where launches of several processes (pids) share correlations (shared_correlations.sql: several
-- ranks' traces pasted into one file), each event's correlation and External id are made its process's own, so the
-- attribution joins a device event to the launches and operators of its process only; process_keys_end.sql puts
-- the trace's values back. A launch's, operator's or other host event's process is its pid. A device event's is the
-- one process with a launch of its correlation; where several have one, the one among them whose launches own the
-- unshared correlations of the device events on its device (their pid: Kineto's device index); where that is not
-- exactly one, the event is returned, and refused (pasted.py). Values become value * (P + 1) + the process's number
-- (0 to P - 1, P the launching processes), or + P for an event of none: no two processes' values meet.
-- Returns the first device event whose process is unknown (event_id, cat, name, correlation, pids, device pid), or
-- one whose value is too large to number so (pids NULL), or no row.
CREATE OR REPLACE TEMP TABLE ks_launch_pids AS
SELECT DISTINCT correlation, pid FROM events WHERE ph = 'X' AND ks_launch_category(cat) AND correlation IS NOT NULL;

CREATE OR REPLACE TEMP TABLE ks_processes AS
SELECT pid, row_number() OVER (ORDER BY pid) - 1 AS process FROM (SELECT DISTINCT pid FROM ks_launch_pids);

CREATE OR REPLACE TEMP TABLE ks_device_owners AS
WITH candidates AS (
    SELECT d.event_id, d.pid AS device_pid, list(l.pid ORDER BY l.pid) AS pids
    FROM events d JOIN ks_launch_pids l USING (correlation)
    WHERE d.cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')
    GROUP BY ALL
),
device_processes AS (  -- the processes whose unshared correlations each device's events carry
    SELECT device_pid, list(DISTINCT pids[1]) AS owners FROM candidates WHERE len(pids) = 1 GROUP BY ALL
)
SELECT event_id, device_pid, pids,
       CASE WHEN len(pids) = 1 THEN pids[1]
            WHEN len(list_intersect(pids, coalesce(owners, []))) = 1 THEN list_intersect(pids, owners)[1] END AS owner
FROM candidates LEFT JOIN device_processes USING (device_pid);

SET VARIABLE ks_process_count = (SELECT count(*) FROM ks_processes);

-- The trace's values, for process_keys_end.sql.
CREATE OR REPLACE TEMP TABLE ks_process_keys AS
SELECT event_id, correlation, external_id FROM events WHERE correlation IS NOT NULL OR external_id IS NOT NULL;

-- run if: NOT EXISTS (SELECT 1 FROM ks_device_owners WHERE owner IS NULL) AND coalesce((SELECT max(greatest(abs(CAST(correlation AS HUGEINT)), abs(CAST(external_id AS HUGEINT)))) FROM ks_process_keys), 0) < 4611686018427387903 // (getvariable('ks_process_count') + 1)
UPDATE events e
SET correlation = e.correlation * (getvariable('ks_process_count') + 1) + k.process,
    external_id = e.external_id * (getvariable('ks_process_count') + 1) + k.process
FROM (SELECT event_id,
             coalesce(CASE WHEN cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') THEN o.process ELSE p.process END,
                      getvariable('ks_process_count')) AS process
      FROM ks_process_keys
      JOIN events USING (event_id)
      LEFT JOIN ks_processes p USING (pid)
      LEFT JOIN (SELECT event_id, process FROM ks_device_owners JOIN ks_processes ON pid = owner) o USING (event_id)
     ) k
WHERE e.event_id = k.event_id;

SELECT d.event_id, e.cat, e.name, e.correlation, d.pids, d.device_pid FROM ks_device_owners d JOIN events e USING (event_id)
WHERE d.owner IS NULL
UNION ALL
SELECT event_id, NULL, NULL, NULL, NULL, NULL FROM ks_process_keys
WHERE greatest(abs(CAST(correlation AS HUGEINT)), abs(CAST(external_id AS HUGEINT))) >= 4611686018427387903 // (getvariable('ks_process_count') + 1)
ORDER BY event_id
LIMIT 1
