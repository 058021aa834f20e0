-- held_by_sql.sql: table ks_held, for attribution_rows.sql: per point of ks_anchors (attribution.sql), the event ids of
-- the spans that hold it, by a range join of the points with the spans of their thread. held.py runs it where the
-- native sweep (_held.c, which gives the same table) is not built; tests/test_held.py compares the two.
-- ks_held(anchor, module_id, function_id, inner_op_id, outer_op_id, inside_op_id, inside_namespaced_op_id).

-- The time bucket (2^shift ns) by which ks_enclosers drops spans: a span inside one bucket holds no launch point
-- unless a point of its thread falls in that bucket. Half of a trace's operators are leaves (aten::view,
-- aten::empty…) that hold no launch; dropping most of them first makes the range join below cheaper in time and
-- memory (measured in benchmarks/RESULTS.md, "Pruning spans before the join"). The bucket is an eighth of the
-- mean time between launch points, rounded up to a power of two: on the sample traces and a scaled one it kept
-- about the fewest spans. Whatever the bucket, the join's result is the same: only spans that hold no point are
-- dropped.
SET VARIABLE ks_bucket_shift = (
    SELECT CAST(greatest(0, ceil(log2(greatest(CAST(max(at_ns) AS DOUBLE) - min(at_ns), 1) / greatest(count(*), 1)))
                            - 3) AS UTINYINT)
    FROM ks_anchors
);

-- The spans that may hold a launch point (ks_spans, attribution.sql), less those inside a bucket that holds no point
-- of their thread. A call scope with its module folded in (ks.fn:linear#3@encoder.fc) is that module's scope too
-- (folded).
CREATE OR REPLACE TEMP TABLE ks_enclosers AS
SELECT event_id, pid, tid, ts_ns, end_ns, kind, kind = 1 AND ks_scope_folded(name) AS folded,
       kind = 2 AND contains(name, '::') AS namespaced, frame
FROM ks_spans
WHERE (ts_ns >> getvariable('ks_bucket_shift')) <> ((end_ns - 1) >> getvariable('ks_bucket_shift'))
   OR (pid, tid, ts_ns >> getvariable('ks_bucket_shift'))
      IN (SELECT (pid, tid, at_ns >> getvariable('ks_bucket_shift')) FROM ks_anchors);

-- Per launch point (or CPU operator), the innermost module, function and operator holding it (latest start, then
-- shortest, then an operator inside a Python frame of its span, then last in the trace) and the outermost operator (and the outermost with a namespace), from a range join (IEJoin) of the points with the
-- spans of their thread; a CPU operator's innermost holding operator is its parent. Each is kept as its order
-- (span_keys.sql), read below by comparisons and its id alone. That order is one 128-bit key when the trace's spans
-- fit (start past the first, duration and event id in 127 bits, with a bit to spare each): the aggregates then
-- compare integers, not structs (a fifth cheaper), and the key becomes an order without being taken apart (which
-- cost more to plan than to run on a small trace); a trace whose spans do not fit compares structs.
SET VARIABLE ks_key_bits = (
    SELECT {t: t, d: d, i: i, t0: t0, packed: coalesce(CAST(t AS INTEGER) + d + i + 1 <= 127 AND d <= 63, true)}
    FROM (SELECT CAST(ceil(log2(max(ts_ns) - min(ts_ns) + 1)) + 1 AS UTINYINT) AS t,
                 CAST(ceil(log2(max(end_ns - ts_ns) + 1)) + 1 AS UTINYINT) AS d,
                 CAST(ceil(log2(max(event_id) + 1)) + 1 AS UTINYINT) AS i,
                 min(ts_ns) AS t0
          FROM ks_enclosers)
);

-- Per point, the latest and earliest span_order (an expression of ks_enclosers' columns, one per span) of the spans of
-- each kind that hold it: the order of ks_innermost's columns, a key or a struct.
CREATE OR REPLACE TEMP MACRO ks_holders(span_order) AS TABLE
SELECT a.anchor,
       max(e.o) FILTER (WHERE e.kind = 0 OR e.folded) AS module,
       max(e.o) FILTER (WHERE e.kind = 1) AS function,
       max(e.o) FILTER (WHERE e.kind = 2) AS inner_op,
       min(e.o) FILTER (WHERE e.kind = 2) AS outer_op,
       min(e.o) FILTER (WHERE e.namespaced) AS outer_namespaced_op
FROM ks_anchors a
JOIN (SELECT *, span_order AS o FROM ks_enclosers) e
  ON e.pid = a.pid AND e.tid = a.tid AND e.ts_ns <= a.at_ns AND a.at_end_ns <= e.end_ns
 AND (a.op_id IS NULL OR e.ts_ns < a.at_ns OR e.end_ns > a.op_end_ns OR e.frame OR e.event_id < a.op_id)
GROUP BY a.anchor;

-- run if: getvariable('ks_key_bits').packed
CREATE OR REPLACE TEMP TABLE ks_innermost AS
SELECT anchor, ks_span_order_of_key(module) AS module, ks_span_order_of_key(function) AS function,
       ks_span_order_of_key(inner_op) AS inner_op, ks_span_order_of_key(outer_op) AS outer_op,
       ks_span_order_of_key(outer_namespaced_op) AS outer_namespaced_op
FROM ks_holders(ks_span_key(ts_ns, end_ns, frame, event_id));

-- The same by orders that are structs, where the spans do not fit one key.
-- run if: NOT getvariable('ks_key_bits').packed
CREATE OR REPLACE TEMP TABLE ks_innermost AS
FROM ks_holders(ks_span_order(ts_ns, end_ns, frame, event_id));

-- The outermost operator holding the point inside its innermost call scope, else inside its innermost module
-- scope, else of all. In a call, that is the call's operator (aten::linear for F.linear); in none, the operator
-- its call is named after (kernels: function_name). Inside by the nesting order of ks_innermost (a later start;
-- the same start and shorter; the same span and an operator where the other is a frame, else later in the trace),
-- so an operator that starts with the scope but outlasts it, or comes before it in the trace, is outside it. Usually
-- the outermost operator of all; a second join only for the points where that one is outside the scope.
CREATE OR REPLACE TEMP TABLE ks_call_ops AS
SELECT anchor, outer_op.id AS inside_op_id, outer_namespaced_op.id AS inside_namespaced_op_id
FROM ks_innermost
WHERE coalesce(function, module) IS NULL OR outer_op > coalesce(function, module);

-- The points whose outermost operator is outside their scope (none in any recording of the sample traces).
-- run if: EXISTS (SELECT 1 FROM ks_innermost WHERE outer_op < coalesce(function, module))
INSERT INTO ks_call_ops
SELECT a.anchor, min(e.o).id, (min(e.o) FILTER (WHERE e.namespaced)).id
FROM (SELECT a.*, coalesce(i.function, i.module) AS scope
      FROM ks_anchors a JOIN ks_innermost i USING (anchor)
      WHERE i.outer_op < coalesce(i.function, i.module)) a
JOIN (SELECT *, ks_span_order(ts_ns, end_ns, frame, event_id) AS o FROM ks_enclosers WHERE kind = 2) e
  ON e.pid = a.pid AND e.tid = a.tid AND e.ts_ns <= a.at_ns AND a.at_end_ns <= e.end_ns
 AND (a.op_id IS NULL OR e.ts_ns < a.at_ns OR e.end_ns > a.op_end_ns OR e.frame OR e.event_id < a.op_id)
WHERE e.o > a.scope
GROUP BY a.anchor;
DROP TABLE ks_enclosers;

CREATE OR REPLACE TEMP TABLE ks_held AS
SELECT i.anchor, i.module.id AS module_id, i.function.id AS function_id, i.inner_op.id AS inner_op_id,
       i.outer_op.id AS outer_op_id, c.inside_op_id, c.inside_namespaced_op_id
FROM ks_innermost i LEFT JOIN ks_call_ops c USING (anchor);
DROP TABLE ks_innermost;
DROP TABLE ks_call_ops;
