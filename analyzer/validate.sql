-- validate.sql: the first event of `events` that the attribution cannot use as it stands, or no row.
-- Each rule is a fault that would otherwise drop a row or attribute it wrongly without a word: a
-- complete event the attribution reads (a device event, launch, operator or annotation) without a readable start or
-- duration, or with a negative duration, a device event that is
-- not a complete event (an "E" apart: it ends a "B", paired_spans.sql, whose cat and name a writer may repeat on it,
-- and one with none open is ignored) or has no correlation, a launch that shares its correlation with another
-- launch of its runtime (ks_launch_family: each runtime numbers its own calls) in its process (pid: each process
-- numbers its own, and several ranks' traces pasted into one file share them: process_parts.sql), a device event
-- listed twice. A launch is a call of a category ks_launch_category names
-- (scope_names.sql); rules 5 and 7 hold CUDA's (cuda_runtime, cuda_driver) to a correlation and a thread, which
-- every CUDA and ROCm trace gives them, and the attribution reads the other runtimes' calls where they have them.
-- Real Kineto traces pass every rule (tests/test_sample_traces.py); tests/test_bad_input.py checks each rule's
-- message.
-- Returns: rule, event_id, cat, name, problem, count (events that break this rule).
-- Rules 1-7 are checked in one pass, each event getting the first rule it breaks: only the lowest rule broken
-- is reported, and every event that breaks it gets it, so its count is exact. The repeats (rules 8, 9) are
-- found by grouping first: a window would sort every launch. Variable ks_rows_checked (validate.py): the
-- native reader checked rules 1-7 on the rows of every part (_kineto.c, rows_breaking_rules) and found none
-- broken, so the pass over every event is skipped.
WITH
device AS (
    SELECT * FROM events WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')
),
launch AS (
    SELECT *, ks_launch_family(cat) AS family FROM events WHERE ph = 'X' AND ks_launch_category(cat)
),
per_event AS (  -- the rules' columns only: reading every event's args too was a third of the scan's cost
    SELECT event_id,
           CASE WHEN ph = 'X' AND held_to_rules AND ts_ns IS NULL THEN 1
                WHEN ph = 'X' AND held_to_rules AND dur_ns IS NULL THEN 2
                WHEN ph = 'X' AND held_to_rules AND dur_ns < 0 THEN 3
                WHEN cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') AND ph IS DISTINCT FROM 'X' AND ph IS DISTINCT FROM 'E'
                     THEN 4
                WHEN ph = 'X' AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cuda_runtime', 'cuda_driver')
                     AND correlation IS NULL THEN 5
                WHEN ph = 'X' AND name IS NULL
                     AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cuda_runtime', 'cuda_driver', 'cpu_op',
                                 'user_annotation') THEN 6
                WHEN ph = 'X' AND (pid IS NULL OR tid IS NULL)
                     AND cat IN ('cuda_runtime', 'cuda_driver', 'cpu_op', 'user_annotation') THEN 7
           END AS rule
    FROM (SELECT *, cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cpu_op', 'user_annotation') OR ks_launch_category(cat)
                    AS held_to_rules
          FROM events)
    WHERE NOT coalesce(getvariable('ks_rows_checked'), false)
),
problems AS (
    SELECT rule, event_id, cat, name,
           CASE rule
               WHEN 1 THEN 'has no numeric ts (start)'
               WHEN 2 THEN 'has no numeric dur (duration)'
               WHEN 3 THEN 'has a negative dur (' || (dur_ns / 1000.0) || ' µs)'
               WHEN 4 THEN 'is a device event whose ph is ' || coalesce('"' || ph || '"', 'missing')
                           || ', not "X" (a complete event with a duration)'
               WHEN 5 THEN CASE WHEN json_extract(args, '$.correlation') IS NULL THEN 'has no args.correlation'
                                ELSE 'has args.correlation ' || json_extract(args, '$.correlation') || ', not an integer'
                           END
               WHEN 6 THEN 'has no name'
               ELSE 'has a pid or tid that is missing or neither an integer nor a string, so its thread is unknown'
           END AS problem
    FROM (SELECT * FROM per_event WHERE rule IS NOT NULL) JOIN events USING (event_id)
    UNION ALL
    SELECT 8, event_id, cat, name,
           'shares correlation ' || correlation || ' with another launch of its runtime, traceEvents[' || first_id || ']'
    FROM launch JOIN (
        SELECT family, correlation, pid, min(event_id) AS first_id FROM launch
        WHERE correlation IS NOT NULL GROUP BY family, correlation, pid HAVING count(*) > 1
    ) USING (family, correlation, pid)
    WHERE event_id > first_id
    UNION ALL
    SELECT 9, event_id, cat, name,
           'repeats device event traceEvents[' || first_id || '] (same correlation, stream and start)'
    FROM device JOIN (
        SELECT correlation, device, stream, ts_ns, min(event_id) AS first_id FROM device
        WHERE ph = 'X' AND correlation IS NOT NULL GROUP BY ALL HAVING count(*) > 1
    ) USING (correlation, device, stream, ts_ns)
    WHERE ph = 'X' AND event_id > first_id
)
SELECT rule, event_id, cat, name, problem, count(*) OVER (PARTITION BY rule) AS count
FROM problems
ORDER BY rule, event_id
LIMIT 1
