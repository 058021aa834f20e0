-- attribution.sql: table `kernels`, one row per device event of the trace (kernel, memcpy, memset).
-- A trace with no device events (a CPU-only recording) gets one row per CPU operator instead, with kind = 'cpu'
-- and its self time: its duration less its child operators' (scopes are not operators). No row is dropped: what
-- cannot be attributed keeps NULL scopes. The last statement returns the launch check (run.py's LaunchCheck):
-- launches, device_events, launches_without_device_event, device_events_without_launch. `kernels` is in no
-- particular order: `profiling_df` sorts, so sorting here too would be paid twice.
--
-- Steps: device event -> its launch (same `correlation`; a CUDA graph replay's kernels all share the
-- cudaGraphLaunch's) -> the scopes and operators whose span holds the launch on the launching thread
-- (module scope, functional scope, innermost and outermost operator) -> one row. A CPU operator is held by
-- the spans that contain it on its thread, itself excepted, by the same nesting order.
-- Each step is a temporary table, so the planner sees real sizes and picks the IEJoin for the
-- containment join (in one statement it planned a hash join on the thread alone with the time range as a
-- filter: quadratic in the trace's length; benchmarks/RESULTS.md, Dead ends). DuckDB 2.0 plans small range joins
-- with equality conditions as merge joins it cannot run ("Unimplemented join type for merge join"), hence
-- merge_join_threshold = 0 (connection.sql). Steps carry event ids, not names: names are looked up once, at the end.
-- Variables: module_prefix, function_prefix (scope name prefixes), sample_separator, graph_replay_call,
-- compiled_region_call and other_operator_call (NULL but in recordings and traces that name those calls from the
-- trace: run.py, calls_named_from_the_trace); macros of scope_names.sql and span_keys.sql, and the join settings of
-- connection.sql (every run's connection has them: connection.py).
-- Runs only on events that passed validate.sql (run.py), whose rules it relies on.

-- A trace without device work (no device event, no runtime or driver call that may launch one: a CPU-only
-- recording) would have the launch steps below make their tables empty and a launch check of zeros: they are not run
-- there, and those tables are made empty and that check set instead (the steps cost a small trace ~5 ms of its ~40:
-- benchmarks/RESULTS.md). frames_needed.sql tells whether a trace holds device work, and its caller (rank_parts.py)
-- answers the guards of variable ks_device_work, which no statement sets, with it; where no caller answers them, the
-- launch steps run (exact on any trace).
-- The runtime and driver calls that launch device work, one per correlation of each runtime (validate.sql refuses
-- two of one: ks_launch_family): where each was made, and whether it must have device events (a kernel or graph
-- launch: a cudaMemsetAsync of zero bytes legitimately has none; seen on the H200, cuBLAS's memsets inside
-- aten::addmm). capture_step marks the calls that begin and end a stream capture, for the launch check.
-- run if: coalesce(getvariable('ks_device_work'), true)
CREATE OR REPLACE TEMP TABLE ks_launches AS
SELECT event_id AS launch_id, correlation, ks_launch_family(cat) AS family, pid, tid, ts_ns, external_id,
       CASE WHEN ks_graph_launch(name) THEN event_id END AS graph_launch_id,
       ks_kernel_launch(name) OR ks_graph_launch(name) AS must_launch,
       ks_capture_step(name) AS capture_step
FROM events
WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns >= 0 AND ks_launch_category(cat)
  AND correlation IS NOT NULL;

-- The operator each External id of a launch names: the first operator with it and where it ran (read from events:
-- ks_enclosers keeps only the operators that may hold a launch). Those of device events without a launch, and
-- whether their names have a namespace, are merged in after ks_items, which finds them.
-- run if: coalesce(getvariable('ks_device_work'), true)
CREATE OR REPLACE TEMP TABLE ks_ops_by_id AS
SELECT external_id, min(event_id) AS op_id, arg_min(pid, event_id) AS pid, arg_min(tid, event_id) AS tid,
       arg_min(ts_ns, event_id) AS ts_ns, arg_min(ts_ns + dur_ns, event_id) AS end_ns,
       CAST(NULL AS BOOLEAN) AS namespaced
FROM events
WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns >= 0 AND cat = 'cpu_op'
  AND NOT starts_with(name, getvariable('module_prefix')) AND NOT starts_with(name, getvariable('function_prefix'))
  AND external_id IN (SELECT external_id FROM ks_launches)
GROUP BY external_id;

-- The same, empty, in a trace without device work (the column types of the statement above).
-- run if: NOT coalesce(getvariable('ks_device_work'), true)
CREATE OR REPLACE TEMP TABLE ks_ops_by_id (
    external_id BIGINT, op_id BIGINT, pid BIGINT, tid BIGINT, ts_ns BIGINT, end_ns BIGINT, namespaced BOOLEAN
);

-- One row per result row, with where (thread, time) it was launched from: device events through the
-- runtime/driver call of their correlation; in a trace without device events, its operators (is_cpu_op), from
-- their start. The thread of a launch is that of the operator its External id names where the two differ and that
-- operator, in the same process, was running at the launch: CUPTI can file the runtime calls of a thread started
-- after another ended under the ended thread's id (seen on the H200 with a Python thread started in each forward),
-- while the operators and scopes carry the thread's own.
-- graph_launch_id: the cudaGraphLaunch of the kernels of a CUDA graph launch. In a recording that opens no scope
-- around a replay (variable graph_replay_call, from the manifest) they are the replay's call when no call scope
-- holds the launch; a call that holds it made it (a library op that launches a graph, a compiled region's replay).
-- run if: coalesce(getvariable('ks_device_work'), true)
CREATE OR REPLACE TEMP TABLE ks_items AS
WITH device_events AS (
    SELECT event_id, cat, ts_ns, dur_ns, correlation, external_id, device, stream
    FROM events
    WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns >= 0 AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')
)
SELECT d.event_id,
       CASE d.cat WHEN 'kernel' THEN 'kernel' WHEN 'gpu_memcpy' THEN 'memcpy' ELSE 'memset' END AS kind,
       d.ts_ns, d.dur_ns, d.device, d.stream, d.correlation,
       COALESCE(d.external_id, l.external_id) AS external_id,
       l.pid AS at_pid, coalesce(o.tid, l.tid) AS at_tid, l.ts_ns AS at_ns, false AS is_cpu_op, l.graph_launch_id,
       false AS namespaced, l.launch_id
FROM device_events d LEFT JOIN ks_launches l USING (correlation)
LEFT JOIN ks_ops_by_id o
  ON o.external_id = l.external_id AND o.pid = l.pid AND o.tid <> l.tid AND o.ts_ns <= l.ts_ns AND l.ts_ns < o.end_ns;

-- The same, empty, in a trace without device work (the column types of the statement above).
-- run if: NOT coalesce(getvariable('ks_device_work'), true)
CREATE OR REPLACE TEMP TABLE ks_items (
    event_id BIGINT, kind VARCHAR, ts_ns BIGINT, dur_ns BIGINT, device INTEGER, stream INTEGER, correlation BIGINT,
    external_id BIGINT, at_pid BIGINT, at_tid BIGINT, at_ns BIGINT, is_cpu_op BOOLEAN, graph_launch_id BIGINT,
    namespaced BOOLEAN, launch_id BIGINT
);

-- Where launches of two runtimes share a correlation (each numbers its own calls: ks_launch_family), a device event
-- of it was joined to each: it keeps the one that launched it, which Kineto gives the External id of the operator
-- that its own runtime's launch has; else the last launch that started before it (a launch precedes its work); else
-- the first. The device event's category does not tell its runtime: Kineto names every device's kernel "kernel".
-- run if: coalesce(getvariable('ks_device_work'), true)
-- run if: (SELECT min(family) <> max(family) FROM ks_launches)
DELETE FROM ks_items WHERE (event_id, launch_id) IN (
    SELECT (i.event_id, i.launch_id)
    FROM ks_items i JOIN ks_launches l USING (launch_id) JOIN events d USING (event_id)
    QUALIFY row_number() OVER (PARTITION BY i.event_id
                               ORDER BY coalesce(d.external_id = l.external_id, false) DESC, l.ts_ns <= d.ts_ns DESC,
                                        CASE WHEN l.ts_ns <= d.ts_ns THEN -l.ts_ns ELSE l.ts_ns END, l.launch_id) > 1
);

-- A trace without device events: its operators. ks_items holds a row for each device event (the DELETE above keeps
-- one of each). A trace without device work has none, and rank_parts.py answers this guard (of variable
-- ks_device_events, which no statement sets) for it; for any other, ks_items is asked.
-- run if: NOT coalesce(getvariable('ks_device_events'), EXISTS (SELECT 1 FROM ks_items))
INSERT INTO ks_items
SELECT event_id, 'cpu', ts_ns, dur_ns, NULL, NULL, NULL, NULL, pid, tid, ts_ns, true, NULL, contains(name, '::'), NULL
FROM events
WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns >= 0 AND cat = 'cpu_op'
  AND NOT starts_with(name, getvariable('module_prefix'))
  AND NOT starts_with(name, getvariable('function_prefix'));

-- The launch check (returned at the end): did the profiler keep, for every launch that must have device events,
-- one, and for every device event, its launch? Only kernel and graph launches must have device events, and not
-- those a thread made while it captured a stream (a CUDA graph recorded in the pass: torch.compile's cudagraph
-- trees record again for new static inputs), which run later as the graph's replay: where the thread's capture
-- calls before the launch began more captures than they ended. Only the launches without device events are
-- tested, in the statement that counts them (a statement of its own cost a small trace ~1 ms).
-- run if: coalesce(getvariable('ks_device_work'), true)
SET VARIABLE ks_launch_check = (
    WITH lost AS (
        SELECT count(*) AS launches, count(*) FILTER (WHERE capturing > 0) AS captured
        FROM (SELECT l.launch_id, sum(c.capture_step) AS capturing
              FROM ks_launches l
              LEFT JOIN ks_launches c
                ON c.capture_step IS NOT NULL AND c.pid = l.pid AND c.tid = l.tid AND c.ts_ns < l.ts_ns
              WHERE l.must_launch AND NOT EXISTS (SELECT 1 FROM ks_items r WHERE r.launch_id = l.launch_id)
              GROUP BY l.launch_id)
    )
    SELECT {launches: (SELECT count(*) FROM ks_launches WHERE must_launch) - lost.captured,
            device_events: (SELECT count(*) FROM ks_items WHERE NOT is_cpu_op),
            launches_without_device_event: lost.launches - lost.captured,
            device_events_without_launch: (SELECT count(*) FROM ks_items WHERE NOT is_cpu_op AND at_ns IS NULL)}
    FROM lost
);

-- The same in a trace without device work: no launch, no device event.
-- run if: NOT coalesce(getvariable('ks_device_work'), true)
SET VARIABLE ks_launch_check = {launches: CAST(0 AS BIGINT), device_events: CAST(0 AS BIGINT),
                                launches_without_device_event: CAST(0 AS BIGINT),
                                device_events_without_launch: CAST(0 AS BIGINT)};

-- A device event without a launch whose flow arrow the trace keeps was launched where the flow starts: an Ascend
-- trace's (npu_tasks.sql) flow from the operator that dispatched the task, a CUDA trace's from a launch the profiler
-- lost. The finish on the device event's (pid, tid) within it, as linked_by_flow.sql reads it ([start, start + dur),
-- its start where it lasts 0 ns: one range, so the join is a range join), and the start of its id and category; of
-- several (torch_npu's from the operator, CANN's from its API call), one on a thread that runs operators.
-- Only where the launch check counted device events without a launch.
-- run if: getvariable('ks_launch_check').device_events_without_launch > 0
UPDATE ks_items AS i SET at_pid = p.start.pid, at_tid = p.start.tid, at_ns = p.start.ts_ns
FROM (
    SELECT d.event_id,
           arg_max({pid: s.pid, tid: s.tid, ts_ns: s.ts_ns},
                   ((s.pid, s.tid) IN (SELECT (pid, tid) FROM events WHERE cat = 'cpu_op'), -s.ts_ns)) AS start
    FROM (SELECT i.event_id, e.pid, e.tid, e.ts_ns, e.ts_ns + greatest(e.dur_ns, 1) AS end_ns
          FROM ks_items i JOIN events e USING (event_id)
          WHERE i.at_ns IS NULL AND NOT i.is_cpu_op) d
    JOIN events f ON f.ph = 'f' AND f.pid = d.pid AND f.tid = d.tid AND f.ts_ns >= d.ts_ns AND f.ts_ns < d.end_ns
    JOIN events s ON s.ph = 's' AND s.flow_id = f.flow_id AND s.cat IS NOT DISTINCT FROM f.cat
                 AND s.pid IS NOT NULL AND s.tid IS NOT NULL AND s.ts_ns IS NOT NULL
    GROUP BY d.event_id
) AS p
WHERE i.event_id = p.event_id;

-- How many of them the flows placed, which the launch check returned at the end does not count (a variable of its
-- own, so that the guards that read ks_launch_check are still asked together; read only where this ran).
-- run if: getvariable('ks_launch_check').device_events_without_launch > 0
SET VARIABLE ks_flow_launched = getvariable('ks_launch_check').device_events_without_launch
    - (SELECT count(*) FROM ks_items WHERE NOT is_cpu_op AND at_ns IS NULL);

-- The operators that device events without a launch name, with whether their names have a namespace (ks_rows holds
-- such an event as its operator). Apart from the launch check, which would otherwise scan every device event for
-- its External id and test every operator's name: a trace with all its launches (most) merges nothing here, its
-- empty set of ids ending the scan of events at once (200 MB of JSON: 60-95 ms less CPU); and only where the
-- launch check counted such events.
-- run if: getvariable('ks_launch_check').device_events_without_launch > 0
MERGE INTO ks_ops_by_id USING (
    SELECT external_id, min(event_id) AS op_id, arg_min(pid, event_id) AS pid, arg_min(tid, event_id) AS tid,
           arg_min(ts_ns, event_id) AS ts_ns, arg_min(ts_ns + dur_ns, event_id) AS end_ns,
           arg_min(contains(name, '::'), event_id) AS namespaced
    FROM events
    WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns >= 0 AND cat = 'cpu_op'
      AND NOT starts_with(name, getvariable('module_prefix')) AND NOT starts_with(name, getvariable('function_prefix'))
      AND external_id IN (SELECT external_id FROM ks_items WHERE NOT is_cpu_op AND at_ns IS NULL)
    GROUP BY external_id
) AS named USING (external_id)
WHEN MATCHED THEN UPDATE SET namespaced = named.namespaced
WHEN NOT MATCHED THEN INSERT BY NAME;

DROP TABLE IF EXISTS ks_launches;

-- The points and spans whose holders the attribution reads: a launch point is held where the spans of its thread
-- hold [at_ns, at_ns + 1); a CPU operator (op_id) is held where they hold its own span ([at_ns, at_end_ns), 1 ns
-- when it lasts 0 ns), by a span that comes before it in nesting order (not itself, nor an identical span later
-- in the trace, which it holds: see ks_innermost). A device event whose launch the trace lacks (the profiler lost
-- the runtime call, or the trace was cut) is held as the operator its External id names is: that operator made
-- the launch, so the spans that hold it held the launch (those inside it may not have). A point's key (anchor) is
-- the least event id of its rows (an operator's: its own), an aggregate that runs on every thread (numbering the
-- points with row_number() ran on one: 0.1 s of a 1 GB trace at any core count); event ids are unique, so no two
-- points share one.
CREATE OR REPLACE TEMP TABLE ks_anchors AS
SELECT min(event_id) AS anchor, at_pid AS pid, at_tid AS tid, at_ns, at_ns + 1 AS at_end_ns,
       CAST(NULL AS BIGINT) AS op_id, CAST(NULL AS BIGINT) AS op_end_ns
FROM ks_items
WHERE NOT is_cpu_op AND at_pid IS NOT NULL AND at_tid IS NOT NULL AND at_ns IS NOT NULL
GROUP BY at_pid, at_tid, at_ns
UNION ALL
SELECT event_id, at_pid, at_tid, at_ns, at_ns + greatest(dur_ns, 1), event_id, at_ns + dur_ns
FROM ks_items
WHERE is_cpu_op;

-- The operators that made the launches the trace lacks, where it lacks any.
-- run if: getvariable('ks_launch_check').device_events_without_launch > 0
INSERT INTO ks_anchors
SELECT op_id, pid, tid, ts_ns, greatest(end_ns, ts_ns + 1), op_id, end_ns
FROM ks_ops_by_id
WHERE external_id IN (SELECT external_id FROM ks_items WHERE NOT is_cpu_op AND at_ns IS NULL);

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

-- Scopes (kind 0 module, 1 function) and operators (2) that may hold a launch point: spans of positive length,
-- less those inside a bucket that holds no point of their thread.
-- A call scope with its module folded in (ks.fn:linear#3@encoder.fc) is that module's scope too (folded).
-- A plain trace's scopes are its Python frames (frames.sql, ks_frame_scopes), named there.
CREATE OR REPLACE TEMP TABLE ks_enclosers AS
SELECT event_id, pid, tid, ts_ns, end_ns, kind, kind = 1 AND ks_scope_folded(name) AS folded,
       kind = 2 AND contains(name, '::') AS namespaced, frame
FROM (
    SELECT event_id, pid, tid, ts_ns, ts_ns + dur_ns AS end_ns, name, false AS frame,
           CAST(CASE WHEN starts_with(name, getvariable('module_prefix')) THEN 0
                     WHEN starts_with(name, getvariable('function_prefix')) THEN 1
                     ELSE 2 END AS UTINYINT) AS kind
    FROM events
    WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns > 0 AND pid IS NOT NULL AND tid IS NOT NULL AND name IS NOT NULL
      AND (cat = 'cpu_op'
           OR (cat = 'user_annotation'
               AND (starts_with(name, getvariable('module_prefix')) OR starts_with(name, getvariable('function_prefix')))))
    UNION ALL
    SELECT event_id, pid, tid, ts_ns, end_ns, name, true, kind FROM ks_frame_scopes
)
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

-- run if: getvariable('ks_key_bits').packed
CREATE OR REPLACE TEMP TABLE ks_innermost AS
WITH packed AS (
    SELECT a.anchor,
           max(e.k) FILTER (WHERE e.kind = 0 OR e.folded) AS module,
           max(e.k) FILTER (WHERE e.kind = 1) AS function,
           max(e.k) FILTER (WHERE e.kind = 2) AS inner_op,
           min(e.k) FILTER (WHERE e.kind = 2) AS outer_op,
           min(e.k) FILTER (WHERE e.namespaced) AS outer_namespaced_op
    FROM ks_anchors a
    JOIN (SELECT *, ks_span_key(ts_ns, end_ns, frame, event_id) AS k FROM ks_enclosers) e
      ON e.pid = a.pid AND e.tid = a.tid AND e.ts_ns <= a.at_ns AND a.at_end_ns <= e.end_ns
     AND (a.op_id IS NULL OR e.ts_ns < a.at_ns OR e.end_ns > a.op_end_ns OR e.frame OR e.event_id < a.op_id)
    GROUP BY a.anchor
)
SELECT anchor, ks_span_order_of_key(module) AS module, ks_span_order_of_key(function) AS function,
       ks_span_order_of_key(inner_op) AS inner_op, ks_span_order_of_key(outer_op) AS outer_op,
       ks_span_order_of_key(outer_namespaced_op) AS outer_namespaced_op
FROM packed;

-- The same by orders that are structs, where the spans do not fit one key.
-- run if: NOT getvariable('ks_key_bits').packed
CREATE OR REPLACE TEMP TABLE ks_innermost AS
SELECT a.anchor,
       max(e.o) FILTER (WHERE e.kind = 0 OR e.folded) AS module,
       max(e.o) FILTER (WHERE e.kind = 1) AS function,
       max(e.o) FILTER (WHERE e.kind = 2) AS inner_op,
       min(e.o) FILTER (WHERE e.kind = 2) AS outer_op,
       min(e.o) FILTER (WHERE e.namespaced) AS outer_namespaced_op
FROM ks_anchors a
JOIN (SELECT *, ks_span_order(ts_ns, end_ns, frame, event_id) AS o FROM ks_enclosers) e
  ON e.pid = a.pid AND e.tid = a.tid AND e.ts_ns <= a.at_ns AND a.at_end_ns <= e.end_ns
 AND (a.op_id IS NULL OR e.ts_ns < a.at_ns OR e.end_ns > a.op_end_ns OR e.frame OR e.event_id < a.op_id)
GROUP BY a.anchor;

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

-- Per result row, the event ids of its scopes and operators. Its operator (op_id): the one its External id
-- names, else the innermost one holding its launch; a CPU row's is itself, and the innermost one holding it is its
-- parent (parent_op_id). Its call's operator (call_op_id: the outermost one in its call scope, or of all outside
-- one) and, outside any call scope, the operator the trace rule names its call after (named_op_id, where the
-- variable other_operator_call turns that rule on: the outermost one with a namespace in its module scope, or of all
-- outside one, else the outermost one there): a row held as an operator (held_op_id: a CPU row, and a device event
-- without a launch, ks_anchors) holds that operator for both. A device event without a launch was launched from its
-- operator's thread (at_pid, at_tid); its at_ns stays NULL.
CREATE OR REPLACE TEMP TABLE ks_rows AS
SELECT it.*, i.module.id AS module_id, i.function.id AS function_id,
       CASE WHEN it.is_cpu_op THEN it.event_id ELSE coalesce(it.external_op_id, i.inner_op.id) END AS op_id,
       CASE WHEN it.is_cpu_op THEN i.inner_op.id END AS parent_op_id,
       coalesce(CASE WHEN i.function IS NULL THEN i.outer_op.id ELSE c.inside_op_id END, it.held_op_id) AS call_op_id,
       CASE WHEN i.function IS NULL AND getvariable('other_operator_call') IS NOT NULL
            THEN coalesce(c.inside_namespaced_op_id, CASE WHEN it.held_op_namespaced THEN it.held_op_id END,
                          c.inside_op_id, it.held_op_id) END AS named_op_id
FROM (SELECT it.* REPLACE (coalesce(it.at_pid, obi.pid) AS at_pid, coalesce(it.at_tid, obi.tid) AS at_tid),
             obi.op_id AS external_op_id,
             CASE WHEN it.is_cpu_op THEN it.event_id WHEN it.at_ns IS NULL THEN obi.op_id END AS held_op_id,
             CASE WHEN it.is_cpu_op THEN it.namespaced WHEN it.at_ns IS NULL THEN obi.namespaced END
                 AS held_op_namespaced,
             CASE WHEN it.at_ns IS NULL AND NOT it.is_cpu_op THEN obi.ts_ns ELSE it.at_ns END AS held_ns
      FROM ks_items it LEFT JOIN ks_ops_by_id obi ON obi.external_id = it.external_id) it
LEFT JOIN ks_anchors a
  ON a.pid = it.at_pid AND a.tid = it.at_tid AND a.at_ns = it.held_ns AND a.op_id IS NOT DISTINCT FROM it.held_op_id
LEFT JOIN ks_innermost i USING (anchor)
LEFT JOIN ks_call_ops c USING (anchor);
DROP TABLE ks_items;
DROP TABLE ks_anchors;
DROP TABLE ks_innermost;
DROP TABLE ks_call_ops;
DROP TABLE ks_ops_by_id;

-- The names of the operators rows point to: their own, their call's and the one their call is named after.
CREATE OR REPLACE TEMP TABLE ks_names AS
SELECT event_id, name FROM events
WHERE event_id IN (SELECT op_id FROM ks_rows UNION SELECT call_op_id FROM ks_rows
                   UNION SELECT named_op_id FROM ks_rows);

CREATE OR REPLACE TEMP TABLE ks_modules AS
SELECT event_id, ks_scope_module(name) AS module_name
FROM ks_scope_names
WHERE event_id IN (SELECT module_id FROM ks_rows);

-- Function scope labels "name#sample" (a folded module's "@module" cut off), read off each distinct scope name
-- once and joined back by name: every call with the same signature repeats its scope's name, so cutting the names
-- row by row would do the same work many times over.
CREATE OR REPLACE TEMP TABLE ks_functions AS
WITH scopes AS (
    SELECT event_id, name
    FROM ks_scope_names
    WHERE event_id IN (SELECT function_id FROM ks_rows)
),
labels AS (
    SELECT name, ks_scope_call(name) AS label FROM (SELECT DISTINCT name FROM scopes)
),
split AS (
    SELECT name,
           CASE WHEN regexp_matches(label, getvariable('sample_separator') || '[0-9]+$')
                THEN regexp_extract(label, '^(.*)' || getvariable('sample_separator') || '[0-9]+$', 1)
                ELSE label END AS function_name,
           TRY_CAST(regexp_extract(label, getvariable('sample_separator') || '([0-9]+)$', 1) AS BIGINT) AS sample_id
    FROM labels
)
SELECT event_id, function_name, sample_id FROM scopes JOIN split USING (name);

-- The row's call (function_name, call_event_id: the event that makes it): the innermost call scope's; else, in
-- recordings and traces that name calls from the trace (the variables), a compiled region's (its outermost operator
-- is "Torch-Compiled Region: …": a torch.compile'd function, which has no scope of its own; or dynamo's "TorchDynamo
-- Cache Lookup" just before it, the same call's guards, which hold no kernel: a CPU row), then a graph launch's,
-- then the trace rule's: the operator named_op_id (the outermost with a namespace, which a TorchScript method's
-- "forward" or an autograd Function's operator holds), by its own name where it has a namespace ("aten::lstm",
-- "torchvision::nms": no functional or dotted torch name holds "::"), else other_operator_call ("Torch-Compiled
-- Region", "triton_poi_fused_…", a user's scope named as an operator) whatever its name, so no name is ambiguous.
CREATE OR REPLACE TABLE kernels AS
WITH named AS (
    SELECT r.*, m.module_name, f.sample_id, o.name AS op, co.name AS call_op,
           coalesce(
               CASE WHEN r.function_id IS NOT NULL THEN {name: f.function_name, id: r.function_id} END,
               CASE WHEN (starts_with(co.name, 'Torch-Compiled Region') OR co.name = 'TorchDynamo Cache Lookup')
                     AND getvariable('compiled_region_call') IS NOT NULL
                    THEN {name: getvariable('compiled_region_call'), id: r.call_op_id} END,
               CASE WHEN r.graph_launch_id IS NOT NULL AND getvariable('graph_replay_call') IS NOT NULL
                    THEN {name: getvariable('graph_replay_call'), id: r.graph_launch_id} END,
               CASE WHEN contains(no.name, '::') THEN {name: no.name, id: r.named_op_id}
                    WHEN no.name IS NOT NULL THEN {name: getvariable('other_operator_call'), id: r.named_op_id} END
           ) AS call
    FROM ks_rows r
    LEFT JOIN ks_modules m ON m.event_id = r.module_id
    LEFT JOIN ks_functions f ON f.event_id = r.function_id
    LEFT JOIN ks_names o ON o.event_id = r.op_id
    LEFT JOIN ks_names co ON co.event_id = r.call_op_id
    LEFT JOIN ks_names no ON no.event_id = r.named_op_id
)
SELECT
    r.module_name,
    r.call.name                                                             AS function_name,
    r.op,
    k.name                                                                  AS kernel,
    r.dur_ns / 1000.0                                                       AS kernel_us,
    r.call_op,
    r.kind,
    r.device,
    r.stream,
    r.sample_id,
    (r.ts_ns - (SELECT min(ts_ns) FROM events WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns >= 0)) / 1000.0
                                                                            AS start_us,
    r.at_tid                                                                AS thread,
    r.correlation,
    r.event_id,
    r.call.id                                                               AS call_event_id,
    k.rank
FROM named r
JOIN events k ON k.event_id = r.event_id;

-- A CPU row's time is its duration less its children's: the rows whose parent it is. Only a trace without device
-- events has CPU rows: a step of its own (rather than a join of every trace's `kernels`) costs the others a guard.
-- run if: getvariable('ks_launch_check').device_events = 0
UPDATE kernels k SET kernel_us = (s.dur_ns - s.children_ns) / 1000.0
FROM (SELECT r.event_id, r.dur_ns, c.children_ns
      FROM ks_rows r
      JOIN (SELECT parent_op_id AS event_id, sum(dur_ns) AS children_ns FROM ks_rows
            WHERE parent_op_id IS NOT NULL GROUP BY ALL) c USING (event_id)) s
WHERE k.event_id = s.event_id;

-- ks_rows and ks_modules are dropped by attribution_end.sql, after torchscript_modules.sql where a recording has
-- TorchScript modules.
DROP TABLE ks_names;
DROP TABLE ks_functions;
DROP TABLE ks_frame_scopes;
DROP VIEW ks_scope_names;
SELECT c.launches, c.device_events, c.launches_without_device_event,
       c.device_events_without_launch
       - CASE WHEN c.device_events_without_launch > 0 THEN getvariable('ks_flow_launched') ELSE 0 END
FROM (SELECT getvariable('ks_launch_check') AS c);
