-- host_processes.sql: whether several processes (pids) launch device work, or, in a CPU recording (no device event
-- and no launch: activities=[CPU]), run CPU operators: several ranks' traces pasted into one file (one process's trace
-- holds its own launches and operators alone), each then a rank of its own (process_parts.sql). A trace with device
-- work is told apart by its launches alone, so that an operator written under another pid beside one process's
-- launches makes no process of its own. Device work as frames_needed.sql asks it: a launch, early in a trace, ends
-- the scan.
SELECT coalesce(min(pid) <> max(pid), false)
FROM events
WHERE ph = 'X'
  AND CASE WHEN EXISTS (SELECT 1 FROM events WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') OR ks_launch_category(cat))
           THEN ks_launch_category(cat) AND correlation IS NOT NULL
           ELSE cat = 'cpu_op' END
