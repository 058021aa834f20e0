-- paired_spans.sql: a trace that writes spans as "B" (begin) and "E" (end) events instead of "X" (complete) ones
-- has each begin event made the complete event the pair stands for, as Chrome's trace viewer pairs them: on each
-- thread (pid, tid), in order of time and then of place in the file, an "E" ends the latest "B" still open, and an
-- "E" with none open is ignored. The "B" row keeps its event_id, name, cat and args (those of its "E" merged in)
-- and gets ph "X" and the duration up to its "E"; the "E" row stays as it is, read by nothing. validate.py runs
-- this only where the trace holds "B" events.
-- A "B" at depth d (the running count of "B" less "E" after it) is ended by the next event at the same depth on
-- its thread, where that is an "E": between the two, every event is deeper, which is a stack's rule; the depth
-- of an "E" is the count before it.
-- Returns: the first "B" left without an "E" that the attribution would read as a span (a device event, launch,
-- operator or annotation): event_id, cat, name, and how many such there are; no row where there is none.
UPDATE events
SET ph = 'X',
    dur_ns = pairs.end_ns - events.ts_ns,
    args = CASE WHEN pairs.end_args IS NULL THEN events.args
                WHEN events.args IS NULL THEN pairs.end_args
                ELSE json_merge_patch(events.args, pairs.end_args) END,
    correlation = coalesce(events.correlation, pairs.end_correlation),
    external_id = coalesce(events.external_id, pairs.end_external_id),
    device = coalesce(events.device, pairs.end_device),
    stream = coalesce(events.stream, pairs.end_stream)
FROM (
    SELECT event_id AS begin_id, next_ph, end_ns, end_args, end_correlation, end_external_id, end_device, end_stream
    FROM (
        SELECT event_id, ph,
               lead(ph) OVER same_depth AS next_ph,
               lead(ts_ns) OVER same_depth AS end_ns,
               lead(args) OVER same_depth AS end_args,
               lead(correlation) OVER same_depth AS end_correlation,
               lead(external_id) OVER same_depth AS end_external_id,
               lead(device) OVER same_depth AS end_device,
               lead(stream) OVER same_depth AS end_stream
        FROM (
            SELECT *,
                   sum(CASE ph WHEN 'B' THEN 1 ELSE -1 END) OVER (
                       PARTITION BY pid, tid ORDER BY ts_ns, event_id ROWS UNBOUNDED PRECEDING
                   ) + CASE ph WHEN 'E' THEN 1 ELSE 0 END AS depth
            FROM events
            WHERE ph IN ('B', 'E') AND ts_ns IS NOT NULL
        )
        WINDOW same_depth AS (PARTITION BY pid, tid, depth ORDER BY ts_ns, event_id)
    )
    WHERE ph = 'B' AND next_ph = 'E'
) AS pairs
WHERE events.event_id = pairs.begin_id;

SELECT event_id, cat, name, count(*) OVER () AS count
FROM events
WHERE ph = 'B' AND (cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cpu_op', 'user_annotation') OR ks_launch_category(cat))
ORDER BY event_id
LIMIT 1;
