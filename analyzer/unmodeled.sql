-- unmodeled.sql: the device events kernelscope does not attribute, per rank and category (Run.notes): complete
-- events on a device, a process that holds no operator, annotation, runtime or driver call of any device (Kineto
-- writes device activity under the device's index as pid), whose category is neither one the attribution reads nor
-- one known to hold no work of its own: MTIA's mtia_insight, a CUPTI range profiler's cuda_profiler_range…
-- Known: the device activity (kernel, gpu_memcpy, gpu_memset), a GPU-side copy of an annotation
-- (gpu_user_annotation), waits (cuda_event, and <device>_sync: cuda_sync, XPU's xpu_sync, Moore Threads' fork's
-- musa_sync…), the XPU scope profiler's metrics records (scope_metrics.sql), the launches (ks_launch_category), and the
-- categories of the CPU side, which a thread of pid 0 may use (a Python thread with pid 0 is seen). A CPU process is a
-- pid with operators, annotations or launches that is not a device's (scope_names.sql, ks_device_pid: the rule by
-- which process_parts.sql tells which pids launch): a device's pid that holds runtime or driver calls (IBM Spyre's
-- plugin files memory releases there) stays a device's. Returns rank, cat, events, dur_us; per rank, most events
-- first.
WITH pids AS (
    SELECT rank, pid, bool_or(cat IN ('cpu_op', 'user_annotation') OR ks_launch_category(cat)) AS host_or_calls,
           ks_device_pid(cat) AS device
    FROM events WHERE pid IS NOT NULL AND cat IS NOT NULL GROUP BY ALL
),
cpu_processes AS (SELECT rank, pid FROM pids WHERE host_or_calls AND NOT device)
SELECT rank, cat, count(*) AS events, coalesce(sum(dur_ns), 0) / 1000.0 AS dur_us
FROM events
WHERE ph = 'X' AND pid IS NOT NULL AND cat IS NOT NULL
  AND cat NOT IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'gpu_user_annotation', 'cuda_event', 'cpu_op',
                  'user_annotation', 'python_function', 'cpu_instant_event', 'overhead', 'Trace', 'ac2g',
                  'xpu_scope_profiler')
  AND NOT (ks_launch_category(cat) OR ends_with(cat, '_sync'))
  AND (rank, pid) NOT IN (SELECT (rank, pid) FROM cpu_processes)
GROUP BY rank, cat
ORDER BY rank, events DESC, cat
