-- held_spans.sql: the rows of the native sweep (held.py, _held.c), as columns without NULLs, points first: the sweep
-- indexes them before it reads the spans, to drop a span in which no point of its thread starts as it comes.
-- The points of ks_anchors; op_id, op_end_ns: a CPU operator's point's own id and end, -1 and 0 for the others. A
-- point without a thread or time is left out: no span holds it.
SELECT pid, tid, at_ns, at_end_ns, anchor, coalesce(op_id, -1), coalesce(op_end_ns, 0)
FROM ks_anchors
WHERE pid IS NOT NULL AND tid IS NOT NULL AND at_ns IS NOT NULL;

-- Every span that may hold a launch point (attribution.sql's ks_spans, which held_by_sql.sql prunes first: the sweep
-- need not). flags: 1 a module scope (or a call scope with its module folded in), 2 a call scope, 4 an operator, 8
-- one whose name has a namespace, 16 a Python frame.
SELECT CAST(CASE kind WHEN 0 THEN 1
                      WHEN 1 THEN CASE WHEN ks_scope_folded(name) THEN 3 ELSE 2 END
                      ELSE CASE WHEN contains(name, '::') THEN 12 ELSE 4 END END
            + CASE WHEN frame THEN 16 ELSE 0 END AS UTINYINT) AS flags,
       pid, tid, ts_ns, end_ns, event_id AS id
FROM ks_spans;
