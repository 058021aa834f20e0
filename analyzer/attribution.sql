-- attribution.sql: table `kernels`, one row per device event of the trace (kernel, memcpy, memset).
-- A trace with no device events (a CPU-only recording) gets one row per leaf CPU operator instead,
-- with kind = 'cpu'. No row is dropped: what cannot be attributed keeps NULL scopes.
--
-- Steps: device event -> its launch (same `correlation`; a CUDA graph replay's kernels all share the
-- cudaGraphLaunch's) -> the scopes and operators whose span holds the launch on the launching thread
-- (module scope, functional scope, innermost and outermost operator) -> one row.
-- Variables: module_prefix, function_prefix (scope name prefixes), sample_separator.
CREATE OR REPLACE TABLE kernels AS
WITH
spans AS (
    SELECT event_id, cat, name, pid, tid, ts_ns, dur_ns, ts_ns + dur_ns AS end_ns,
           correlation, external_id, device, stream
    FROM events
    WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND dur_ns >= 0
),
scopes AS (
    SELECT event_id, pid, tid, ts_ns, end_ns,
           CASE WHEN starts_with(name, getvariable('module_prefix')) THEN 'module' ELSE 'function' END AS kind,
           CASE WHEN starts_with(name, getvariable('module_prefix'))
                THEN name[length(getvariable('module_prefix')) + 1:]
                ELSE name[length(getvariable('function_prefix')) + 1:] END AS label
    FROM spans
    WHERE cat IN ('cpu_op', 'user_annotation')
      AND (starts_with(name, getvariable('module_prefix')) OR starts_with(name, getvariable('function_prefix')))
),
ops AS (
    SELECT event_id, pid, tid, ts_ns, dur_ns, end_ns, name, external_id
    FROM spans
    WHERE cat = 'cpu_op'
      AND NOT starts_with(name, getvariable('module_prefix'))
      AND NOT starts_with(name, getvariable('function_prefix'))
),
device_events AS (
    SELECT * FROM spans WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')
),
-- Operators properly nest on a thread, so an operator is a leaf when the next one to start (in
-- (start, longest first) order) starts at or after its end.
leaf_ops AS (
    SELECT * EXCLUDE (next_start)
    FROM (
        SELECT *, lead(ts_ns) OVER (PARTITION BY pid, tid ORDER BY ts_ns, end_ns DESC, event_id) AS next_start
        FROM ops
    )
    WHERE (next_start IS NULL OR next_start >= end_ns)
      AND NOT EXISTS (SELECT 1 FROM device_events)
),
launches AS (
    SELECT correlation, pid, tid, ts_ns, external_id
    FROM spans
    WHERE cat IN ('cuda_runtime', 'cuda_driver') AND correlation IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY correlation ORDER BY ts_ns, event_id) = 1
),
items AS (
    SELECT d.event_id, d.name AS kernel,
           CASE d.cat WHEN 'kernel' THEN 'kernel' WHEN 'gpu_memcpy' THEN 'memcpy' ELSE 'memset' END AS kind,
           d.ts_ns, d.dur_ns, d.device, d.stream, d.correlation,
           COALESCE(d.external_id, l.external_id) AS external_id,
           l.pid AS at_pid, l.tid AS at_tid, l.ts_ns AS at_ns, CAST(NULL AS VARCHAR) AS leaf_op
    FROM device_events d LEFT JOIN launches l USING (correlation)
    UNION ALL
    SELECT event_id, name, 'cpu', ts_ns, dur_ns, NULL, NULL, NULL, external_id, pid, tid, ts_ns, name
    FROM leaf_ops
),
anchors AS (
    SELECT DISTINCT at_pid AS pid, at_tid AS tid, at_ns FROM items WHERE at_ns IS NOT NULL
),
enclosers AS (
    SELECT event_id, pid, tid, ts_ns, end_ns, kind, label FROM scopes
    UNION ALL
    SELECT event_id, pid, tid, ts_ns, end_ns, 'op', name FROM ops
),
enclosing AS (
    SELECT a.pid, a.tid, a.at_ns, e.kind, e.label, e.ts_ns, e.end_ns, e.event_id
    FROM anchors a JOIN enclosers e
      ON e.pid = a.pid AND e.tid = a.tid AND e.ts_ns <= a.at_ns AND a.at_ns < e.end_ns
),
innermost AS (
    SELECT pid, tid, at_ns,
           arg_max(label, {s: ts_ns, e: -end_ns, id: event_id}) FILTER (WHERE kind = 'module')   AS module_name,
           arg_max(label, {s: ts_ns, e: -end_ns, id: event_id}) FILTER (WHERE kind = 'function') AS function_label,
           max(ts_ns) FILTER (WHERE kind = 'function')                                          AS function_start,
           arg_max(label, {s: ts_ns, e: -end_ns, id: event_id}) FILTER (WHERE kind = 'op')       AS inner_op
    FROM enclosing
    GROUP BY ALL
),
-- The outermost operator under the functional call (aten::linear for F.linear), or the outermost one.
call_ops AS (
    SELECT e.pid, e.tid, e.at_ns, arg_min(e.label, {s: e.ts_ns, e: -e.end_ns, id: e.event_id}) AS call_op
    FROM enclosing e JOIN innermost i USING (pid, tid, at_ns)
    WHERE e.kind = 'op' AND (i.function_start IS NULL OR e.ts_ns >= i.function_start)
    GROUP BY ALL
),
ops_by_id AS (
    SELECT external_id, name FROM ops WHERE external_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY external_id ORDER BY event_id) = 1
),
first_event AS (
    SELECT min(ts_ns) AS t0 FROM spans
)
SELECT
    i.module_name,
    CASE WHEN regexp_matches(i.function_label, getvariable('sample_separator') || '[0-9]+$')
         THEN regexp_extract(i.function_label, '^(.*)' || getvariable('sample_separator') || '[0-9]+$', 1)
         ELSE i.function_label END                                           AS function_name,
    COALESCE(it.leaf_op, o.name, i.inner_op)                                AS op,
    it.kernel,
    it.dur_ns / 1000.0                                                      AS kernel_us,
    c.call_op,
    it.kind,
    it.device,
    it.stream,
    TRY_CAST(regexp_extract(i.function_label, getvariable('sample_separator') || '([0-9]+)$', 1) AS BIGINT)
                                                                            AS sample_id,
    (it.ts_ns - f.t0) / 1000.0                                              AS start_us,
    it.at_tid                                                               AS thread,
    it.correlation,
    it.event_id
FROM items it
CROSS JOIN first_event f
LEFT JOIN innermost i ON i.pid = it.at_pid AND i.tid = it.at_tid AND i.at_ns = it.at_ns
LEFT JOIN call_ops c ON c.pid = it.at_pid AND c.tid = it.at_tid AND c.at_ns = it.at_ns
LEFT JOIN ops_by_id o ON o.external_id = it.external_id
ORDER BY it.ts_ns, it.event_id;
