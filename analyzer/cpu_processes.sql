-- cpu_processes.sql: in a trace without launches (launch_processes.sql), whether it holds CPU recordings
-- (activities=[CPU]) of several processes pasted into one file: no device work (no device event or launch in any
-- phase, as frames_needed.sql asks it) and CPU operators of several pids, each then a rank of its own
-- (process_parts.sql). A trace with device work is told apart by its launches alone, so that an operator written
-- under another pid beside one process's work makes no process of its own. Asked only where no launch is, so that a
-- trace with launches pays for no second scan.
SELECT NOT EXISTS (SELECT 1 FROM events WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') OR ks_launch_category(cat))
       AND coalesce((SELECT min(pid) <> max(pid) FROM events WHERE ph = 'X' AND cat = 'cpu_op'), false)
