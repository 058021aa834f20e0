-- paired_spans.sql: a trace that writes spans as "B" (begin) and "E" (end) events instead of "X" (complete) ones
-- has each begin event made the complete event the pair stands for: on each thread (pid, tid), in order of time, an
-- "E" ends the latest "B" still open, and an "E" with none open is ignored. The "B" row keeps its event_id, name, cat
-- and args (those of its "E" merged in) and gets ph "X" and the duration up to its "E"; the "E" row stays as it is,
-- read by nothing. validate.py runs this only where the trace holds "B" events.
-- At one time on a thread, the "E"s come before the "B"s (then each in the file's order): a span that ends where the
-- next one begins is ended before that one opens, whichever of the two events the file writes first (a writer that
-- sorts its events by time and then phase writes the "B" first). A span that begins and ends at one time is written
-- with its "E" after its "B", which this order would read as ending the span around it; so where an "E" would end a
-- span of another name while a span of its own name begins at its time (both named), that time keeps the file's
-- order. Chrome's viewer keeps the file's order at every time (tests/test_chrome_shapes.py shows both).
-- A "B" at depth d (the running count of "B" less "E" after it) is ended by the next event at the same depth on
-- its thread, where that is an "E": between the two, every event is deeper, which is a stack's rule; the depth
-- of an "E" is the count before it.
-- Returns: the first "B" left without an "E" that the attribution would read as a span (a device event, launch,
-- operator or annotation): event_id, cat, name, and how many such there are; no row where there is none.

-- The depth of a "B" or "E" on its thread, its events ordered by time, then `tie`, then the file's order: both
-- pairings below count it, the second with the ties the first settles.
CREATE OR REPLACE TEMP MACRO ks_span_depth(pid, tid, ts_ns, tie, event_id, ph) AS
    sum(CASE ph WHEN 'B' THEN 1 ELSE -1 END) OVER (
        PARTITION BY pid, tid ORDER BY ts_ns, tie, event_id ROWS UNBOUNDED PRECEDING
    ) + CASE ph WHEN 'E' THEN 1 ELSE 0 END;

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
    WITH marks AS (
        SELECT event_id, pid, tid, ts_ns, ph, name, CASE ph WHEN 'E' THEN 0 ELSE 1 END AS tie  -- the "E"s first
        FROM events
        WHERE ph IN ('B', 'E') AND ts_ns IS NOT NULL
    ),
    ends_first_pairs AS (  -- the pairing with the "E"s first at every time, to find the times it misnames
        SELECT pid, tid, ph, name, lead(ph) OVER same_depth AS next_ph, lead(name) OVER same_depth AS end_name,
               lead(ts_ns) OVER same_depth AS end_ns
        FROM (SELECT *, ks_span_depth(pid, tid, ts_ns, tie, event_id, ph) AS depth FROM marks)
        WINDOW same_depth AS (PARTITION BY pid, tid, depth ORDER BY ts_ns, tie, event_id)
    ),
    misnamed AS (
        SELECT DISTINCT p.pid, p.tid, p.end_ns AS ts_ns
        FROM ends_first_pairs p
        JOIN marks b ON b.ph = 'B' AND b.pid = p.pid AND b.tid = p.tid AND b.ts_ns = p.end_ns AND b.name = p.end_name
        WHERE p.ph = 'B' AND p.next_ph = 'E' AND p.name <> p.end_name
    ),
    ordered AS (
        SELECT m.event_id, m.pid, m.tid, m.ts_ns, m.ph, CASE WHEN g.ts_ns IS NULL THEN m.tie ELSE 0 END AS tie
        FROM marks m LEFT JOIN misnamed g ON g.pid = m.pid AND g.tid = m.tid AND g.ts_ns = m.ts_ns
    )
    SELECT begin_id, end_ns, e.args AS end_args, e.correlation AS end_correlation, e.external_id AS end_external_id,
           e.device AS end_device, e.stream AS end_stream
    FROM (
        SELECT event_id AS begin_id, ph AS begin_ph, lead(ph) OVER same_depth AS next_ph,
               lead(event_id) OVER same_depth AS end_id, lead(ts_ns) OVER same_depth AS end_ns
        FROM (SELECT *, ks_span_depth(pid, tid, ts_ns, tie, event_id, ph) AS depth FROM ordered)
        WINDOW same_depth AS (PARTITION BY pid, tid, depth ORDER BY ts_ns, tie, event_id)
    )
    JOIN events e ON e.event_id = end_id
    WHERE begin_ph = 'B' AND next_ph = 'E'
) AS pairs
WHERE events.event_id = pairs.begin_id;

SELECT event_id, cat, name, count(*) OVER () AS count
FROM events
WHERE ph = 'B' AND (cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cpu_op', 'user_annotation') OR ks_launch_category(cat))
ORDER BY event_id
LIMIT 1;
