-- frames_needed.sql: whether frames.sql has scopes to find: the trace holds Python frames and no kernelscope scope
-- (a kernelscope recording made with with_stack keeps its own).
-- And, as device_work, whether the trace holds a device event or a runtime or driver call that may launch one, in
-- any phase: the answer to the guards of attribution.sql's launch steps, asked here, in a statement that runs anyway,
-- as one more subquery instead of a statement of its own. (Whether it holds a device event that attribution.sql makes
-- a row of is not asked here: Kineto writes the device events last, so that subquery read most of a large trace's
-- events, +4.6 ms at 100 MB, where a runtime call comes early.)
-- Asked only where the native reader did not tell both (rank_parts.py: a trace it read whole and found no Python
-- frame in needs no frames, and it tells device_work as _kineto.c's part_facts).
SELECT EXISTS (SELECT 1 FROM events WHERE cat = 'python_function')
       AND NOT EXISTS (
           SELECT 1 FROM events
           WHERE cat IN ('cpu_op', 'user_annotation')
             AND (starts_with(name, getvariable('module_prefix')) OR starts_with(name, getvariable('function_prefix')))
       ) AS frames_needed,
       EXISTS (
           SELECT 1 FROM events WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') OR ks_launch_category(cat)
       ) AS device_work
