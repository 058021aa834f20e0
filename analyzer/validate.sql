-- validate.sql: the first event of `events` that the attribution cannot use as it stands, or no row.
-- Each rule is a fault that would otherwise drop a row or attribute it wrongly without a word: a
-- complete event without a readable start or duration, a negative duration, a device event that is
-- not a complete event or has no correlation, a launch that shares its correlation with another
-- launch, a device event listed twice. Real Kineto traces pass every rule (tests/test_sample_traces.py);
-- tests/test_bad_input.py checks each rule's message.
-- Returns: rule, event_id, cat, name, problem, count (events that break this rule).
-- The repeats (rules 8, 9) are found by grouping first: a window over every launch cost 4x more.
WITH
device AS (
    SELECT * FROM events WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')
),
launch AS (
    SELECT * FROM events WHERE ph = 'X' AND cat IN ('cuda_runtime', 'cuda_driver')
),
problems AS (
    SELECT 1 AS rule, event_id, cat, name, 'has no numeric ts (start)' AS problem
    FROM events WHERE ph = 'X' AND ts_ns IS NULL
    UNION ALL
    SELECT 2, event_id, cat, name, 'has no numeric dur (duration)'
    FROM events WHERE ph = 'X' AND dur_ns IS NULL
    UNION ALL
    SELECT 3, event_id, cat, name, 'has a negative dur (' || (dur_ns / 1000.0) || ' µs)'
    FROM events WHERE ph = 'X' AND dur_ns < 0
    UNION ALL
    SELECT 4, event_id, cat, name, 'is a device event whose ph is ' || coalesce('"' || ph || '"', 'missing')
           || ', not "X" (a complete event with a duration)'
    FROM device WHERE ph IS DISTINCT FROM 'X'
    UNION ALL
    SELECT 5, event_id, cat, name,
           CASE WHEN json_extract(args, '$.correlation') IS NULL THEN 'has no args.correlation'
                ELSE 'has args.correlation ' || json_extract(args, '$.correlation') || ', not an integer' END
    FROM events
    WHERE ph = 'X' AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cuda_runtime', 'cuda_driver')
      AND correlation IS NULL
    UNION ALL
    SELECT 6, event_id, cat, name, 'has no name'
    FROM events
    WHERE ph = 'X' AND name IS NULL
      AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cuda_runtime', 'cuda_driver', 'cpu_op', 'user_annotation')
    UNION ALL
    SELECT 7, event_id, cat, name, 'has a pid or tid that is not an integer, so its thread is unknown'
    FROM events
    WHERE ph = 'X' AND (pid IS NULL OR tid IS NULL)
      AND cat IN ('cuda_runtime', 'cuda_driver', 'cpu_op', 'user_annotation')
    UNION ALL
    SELECT 8, event_id, cat, name,
           'shares correlation ' || correlation || ' with another launch, traceEvents[' || first_id || ']'
    FROM launch JOIN (
        SELECT correlation, min(event_id) AS first_id FROM launch
        WHERE correlation IS NOT NULL GROUP BY correlation HAVING count(*) > 1
    ) USING (correlation)
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
