-- launch_processes.sql: whether launches come from several processes (pids): several ranks' traces pasted into one
-- file (one process's trace holds its own launches alone), each then a rank of its own (process_parts.sql); and
-- whether any launch does (where none does, cpu_processes.sql asks the same of the CPU operators).
SELECT coalesce(min(pid) <> max(pid), false), count(*) > 0
FROM events WHERE ph = 'X' AND ks_launch_category(cat) AND correlation IS NOT NULL
