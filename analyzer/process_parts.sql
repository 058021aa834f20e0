-- process_parts.sql: where several processes (pids) launch, or in a CPU recording run CPU operators
-- (launch_processes.sql, cpu_processes.sql: several ranks' traces pasted into one file, whose correlations may
-- collide), table ks_process_of_event: each event's (event_id's) process, a number from 0 in the order of the
-- processes' first events in the file, so that each process is attributed as a rank of its own (pasted.py,
-- rank_parts.py). The processes are the pids with launches, or, in a CPU recording (no launch here: cpu_processes.sql),
-- with CPU operators. A device's pid (scope_names.sql, ks_device_pid: the rule unmodeled.sql reads too) launches
-- nothing, whatever calls are filed under it: where no other pid is left, the trace is one process's (pasted.py). A launch's, operator's or other host event's process is its pid's. A device event's is the one process
-- with a launch of its correlation; where several have one, the one among them whose launches own the unshared
-- correlations of the device events on its device (their pid: Kineto's device index); where that is not exactly one,
-- the event is returned, and refused (pasted.py). Any other event is its pid's where that is a device of one owner (its
-- metadata, a GPU-side annotation), else the first process's. Returns the first device event whose process is unknown
-- (event_id, cat, name, correlation, pids, device pid), or no row.
CREATE OR REPLACE TEMP TABLE ks_launch_pids AS
WITH device_pids AS (SELECT pid FROM events WHERE pid IS NOT NULL GROUP BY pid HAVING ks_device_pid(cat))
SELECT DISTINCT correlation, pid FROM events
WHERE ph = 'X' AND ks_launch_category(cat) AND correlation IS NOT NULL AND pid NOT IN (SELECT pid FROM device_pids);

CREATE OR REPLACE TEMP TABLE ks_processes AS
SELECT pid, row_number() OVER (ORDER BY min(event_id)) - 1 AS process
FROM events
WHERE pid IN (SELECT pid FROM ks_launch_pids)
   OR NOT EXISTS (SELECT 1 FROM events WHERE ph = 'X' AND ks_launch_category(cat) AND correlation IS NOT NULL)
      AND pid IN (SELECT pid FROM events WHERE ph = 'X' AND cat = 'cpu_op')
GROUP BY pid;

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

-- run if: NOT EXISTS (SELECT 1 FROM ks_device_owners WHERE owner IS NULL)
CREATE OR REPLACE TEMP TABLE ks_process_of_event AS
WITH devices AS (  -- the devices whose work is of one process
    SELECT device_pid AS pid, any_value(owner) AS owner FROM ks_device_owners
    GROUP BY ALL HAVING count(DISTINCT owner) = 1
)
SELECT e.event_id, CAST(coalesce(o.process, p.process, d.process, 0) AS INTEGER) AS process
FROM events e
LEFT JOIN (SELECT event_id, process FROM ks_device_owners JOIN ks_processes ON pid = owner) o USING (event_id)
LEFT JOIN ks_processes p ON p.pid = e.pid
LEFT JOIN (SELECT devices.pid, process FROM devices JOIN ks_processes ON ks_processes.pid = owner) d ON d.pid = e.pid;

SELECT d.event_id, e.cat, e.name, e.correlation, d.pids, d.device_pid
FROM ks_device_owners d JOIN events e USING (event_id)
WHERE d.owner IS NULL
ORDER BY event_id
LIMIT 1
