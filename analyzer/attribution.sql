-- attribution.sql: table `kernels`, one row per device event of the trace (kernel, memcpy, memset).
-- A trace with no device events (a CPU-only recording) gets one row per leaf CPU operator instead,
-- with kind = 'cpu'. No row is dropped: what cannot be attributed keeps NULL scopes.
--
-- Steps: device event -> its launch (same `correlation`; a CUDA graph replay's kernels all share the
-- cudaGraphLaunch's) -> the scopes and operators whose span holds the launch on the launching thread
-- (module scope, functional scope, innermost and outermost operator) -> one row.
-- Each step is a temporary table, so the planner sees real sizes and picks the IEJoin for the
-- containment join (in one statement it planned a hash join on the thread alone with the time range as a
-- filter: quadratic in the trace's length, 31 s on a 100 MB trace). DuckDB 2.0 plans small range joins
-- with equality conditions as merge joins it cannot run ("Unimplemented join type for merge join"), hence
-- merge_join_threshold = 0. Variables: module_prefix, function_prefix (scope name prefixes),
-- sample_separator.
SET prefer_range_joins = true;
SET merge_join_threshold = 0;

-- Scopes (module, function) and operators: what can enclose a launch, on its thread.
CREATE OR REPLACE TEMP TABLE ks_enclosers AS
SELECT event_id, pid, tid, ts_ns, ts_ns + dur_ns AS end_ns, external_id,
       CASE WHEN starts_with(name, getvariable('module_prefix')) THEN 'module'
            WHEN starts_with(name, getvariable('function_prefix')) THEN 'function'
            ELSE 'op' END AS kind,
       CASE WHEN starts_with(name, getvariable('module_prefix')) THEN name[length(getvariable('module_prefix')) + 1:]
            WHEN starts_with(name, getvariable('function_prefix')) THEN name[length(getvariable('function_prefix')) + 1:]
            ELSE name END AS label
FROM events
WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND dur_ns >= 0 AND name IS NOT NULL
  AND (cat = 'cpu_op'
       OR (cat = 'user_annotation'
           AND (starts_with(name, getvariable('module_prefix')) OR starts_with(name, getvariable('function_prefix')))));

CREATE OR REPLACE TEMP TABLE ks_device_events AS
SELECT event_id, cat, name, ts_ns, dur_ns, correlation, external_id, device, stream
FROM events
WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND dur_ns >= 0
  AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset');

-- Operators properly nest on a thread, so an operator is a leaf when the next one to start (in
-- (start, longest first) order) starts at or after its end. Only for traces without device events.
CREATE OR REPLACE TEMP TABLE ks_leaf_ops AS
SELECT * EXCLUDE (next_start)
FROM (
    SELECT event_id, pid, tid, ts_ns, end_ns - ts_ns AS dur_ns, end_ns, label AS name, external_id,
           lead(ts_ns) OVER (PARTITION BY pid, tid ORDER BY ts_ns, end_ns DESC, event_id) AS next_start
    FROM ks_enclosers
    WHERE kind = 'op' AND (SELECT count(*) FROM ks_device_events) = 0
)
WHERE next_start IS NULL OR next_start >= end_ns;

-- The launch of each correlation: its first runtime/driver call.
CREATE OR REPLACE TEMP TABLE ks_launches AS
SELECT correlation, launch.pid, launch.tid, launch.ts_ns, launch.external_id
FROM (
    SELECT correlation, arg_min({pid: pid, tid: tid, ts_ns: ts_ns, external_id: external_id}, (ts_ns, event_id)) AS launch
    FROM events
    WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND dur_ns >= 0
      AND cat IN ('cuda_runtime', 'cuda_driver') AND correlation IS NOT NULL
    GROUP BY correlation
);

-- One row per result row: where (thread, time) it was launched from.
CREATE OR REPLACE TEMP TABLE ks_items AS
SELECT d.event_id, d.name AS kernel,
       CASE d.cat WHEN 'kernel' THEN 'kernel' WHEN 'gpu_memcpy' THEN 'memcpy' ELSE 'memset' END AS kind,
       d.ts_ns, d.dur_ns, d.device, d.stream, d.correlation,
       COALESCE(d.external_id, l.external_id) AS external_id,
       l.pid AS at_pid, l.tid AS at_tid, l.ts_ns AS at_ns, CAST(NULL AS VARCHAR) AS leaf_op
FROM ks_device_events d LEFT JOIN ks_launches l USING (correlation)
UNION ALL
SELECT event_id, name, 'cpu', ts_ns, dur_ns, NULL, NULL, NULL, external_id, pid, tid, ts_ns, name
FROM ks_leaf_ops;

CREATE OR REPLACE TEMP TABLE ks_anchors AS
SELECT DISTINCT at_pid AS pid, at_tid AS tid, at_ns FROM ks_items
WHERE at_pid IS NOT NULL AND at_tid IS NOT NULL AND at_ns IS NOT NULL;

-- Every (launch point, scope or operator holding it): a range join (IEJoin under prefer_range_joins).
CREATE OR REPLACE TEMP TABLE ks_enclosing AS
SELECT a.pid, a.tid, a.at_ns, e.kind, e.label, e.ts_ns, e.end_ns, e.event_id
FROM ks_anchors a JOIN ks_enclosers e
  ON e.pid = a.pid AND e.tid = a.tid AND e.ts_ns <= a.at_ns AND a.at_ns < e.end_ns;

-- Innermost module, function and operator around each launch point (latest start, then shortest), and
-- the outermost operator, which is the call's operator (aten::linear for F.linear) when it starts
-- inside the innermost functional call.
CREATE OR REPLACE TEMP TABLE ks_innermost AS
SELECT pid, tid, at_ns,
       arg_max(label, {s: ts_ns, e: -end_ns, id: event_id}) FILTER (WHERE kind = 'module')   AS module_name,
       arg_max(label, {s: ts_ns, e: -end_ns, id: event_id}) FILTER (WHERE kind = 'function') AS function_label,
       max(ts_ns) FILTER (WHERE kind = 'function')                                          AS function_start,
       arg_max(label, {s: ts_ns, e: -end_ns, id: event_id}) FILTER (WHERE kind = 'op')       AS inner_op,
       arg_min(label, {s: ts_ns, e: -end_ns, id: event_id}) FILTER (WHERE kind = 'op')       AS outer_op,
       min(ts_ns) FILTER (WHERE kind = 'op')                                                AS outer_op_start
FROM ks_enclosing
GROUP BY ALL;

-- The outermost operator under the functional call (aten::linear for F.linear), or the outermost one;
-- only where the outermost operator of all starts before the call (e.g. a compiled region around it).
CREATE OR REPLACE TEMP TABLE ks_call_ops AS
SELECT i.pid, i.tid, i.at_ns, i.outer_op AS call_op
FROM ks_innermost i
WHERE i.function_start IS NULL OR i.outer_op_start >= i.function_start
UNION ALL
SELECT e.pid, e.tid, e.at_ns, arg_min(e.label, {s: e.ts_ns, e: -e.end_ns, id: e.event_id})
FROM ks_enclosing e JOIN ks_innermost i USING (pid, tid, at_ns)
WHERE i.outer_op_start < i.function_start AND e.kind = 'op' AND e.ts_ns >= i.function_start
GROUP BY ALL;

-- The operator each External id names (its first one), for the ids that rows carry.
CREATE OR REPLACE TEMP TABLE ks_ops_by_id AS
SELECT external_id, arg_min(label, event_id) AS name
FROM ks_enclosers
WHERE kind = 'op' AND external_id IN (SELECT external_id FROM ks_items)
GROUP BY external_id;

-- Function scope labels "name#sample" split once per distinct label.
CREATE OR REPLACE TEMP TABLE ks_labels AS
SELECT function_label,
       CASE WHEN regexp_matches(function_label, getvariable('sample_separator') || '[0-9]+$')
            THEN regexp_extract(function_label, '^(.*)' || getvariable('sample_separator') || '[0-9]+$', 1)
            ELSE function_label END AS function_name,
       TRY_CAST(regexp_extract(function_label, getvariable('sample_separator') || '([0-9]+)$', 1) AS BIGINT) AS sample_id
FROM (SELECT DISTINCT function_label FROM ks_innermost WHERE function_label IS NOT NULL);

CREATE OR REPLACE TABLE kernels AS
SELECT
    i.module_name,
    lb.function_name,
    COALESCE(it.leaf_op, o.name, i.inner_op)                                AS op,
    it.kernel,
    it.dur_ns / 1000.0                                                      AS kernel_us,
    c.call_op,
    it.kind,
    it.device,
    it.stream,
    lb.sample_id,
    (it.ts_ns - (SELECT min(ts_ns) FROM events
                 WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND dur_ns >= 0)) / 1000.0 AS start_us,
    it.at_tid                                                               AS thread,
    it.correlation,
    it.event_id
FROM ks_items it
LEFT JOIN ks_innermost i ON i.pid = it.at_pid AND i.tid = it.at_tid AND i.at_ns = it.at_ns
LEFT JOIN ks_labels lb ON lb.function_label = i.function_label
LEFT JOIN ks_call_ops c ON c.pid = it.at_pid AND c.tid = it.at_tid AND c.at_ns = it.at_ns
LEFT JOIN ks_ops_by_id o ON o.external_id = it.external_id
ORDER BY it.ts_ns, it.event_id;

DROP TABLE ks_enclosers;
DROP TABLE ks_device_events;
DROP TABLE ks_leaf_ops;
DROP TABLE ks_launches;
DROP TABLE ks_items;
DROP TABLE ks_anchors;
DROP TABLE ks_enclosing;
DROP TABLE ks_innermost;
DROP TABLE ks_call_ops;
DROP TABLE ks_ops_by_id;
DROP TABLE ks_labels;
