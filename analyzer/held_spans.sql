-- held_spans.sql: the rows of the native sweep (held.py, _held.c): every span that may hold a launch point
-- (attribution.sql's ks_spans, which held_by_sql.sql prunes first: the sweep need not) and every point of
-- ks_anchors, as columns without NULLs. flags: 1 a module scope (or a call scope with its module folded in), 2 a call
-- scope, 4 an operator, 8 one whose name has a namespace, 16 a Python frame, 32 a point; op_id, op_end_ns: a CPU
-- operator's point's own id and end, -1 and 0 for the others. A point without a thread or time is left out: no span
-- holds it.
SELECT CAST(CASE kind WHEN 0 THEN 1
                      WHEN 1 THEN CASE WHEN ks_scope_folded(name) THEN 3 ELSE 2 END
                      ELSE CASE WHEN contains(name, '::') THEN 12 ELSE 4 END END
            + CASE WHEN frame THEN 16 ELSE 0 END AS UTINYINT) AS flags,
       pid, tid, ts_ns, end_ns, event_id AS id, CAST(-1 AS BIGINT) AS op_id, CAST(0 AS BIGINT) AS op_end_ns
FROM ks_spans
UNION ALL
SELECT CAST(32 AS UTINYINT), pid, tid, at_ns, at_end_ns, anchor, coalesce(op_id, -1), coalesce(op_end_ns, 0)
FROM ks_anchors
WHERE pid IS NOT NULL AND tid IS NOT NULL AND at_ns IS NOT NULL;
