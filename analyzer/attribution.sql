-- attribution.sql, then held.py, then attribution_rows.sql (rank_parts.py runs them): table `kernels`, one row per
-- device event of the trace (kernel, memcpy, memset).
-- A trace with no device events (a CPU-only recording) gets one row per CPU operator instead, with kind = 'cpu'
-- and its self time: its duration less its child operators' (scopes are not operators). No row is dropped: what
-- cannot be attributed keeps NULL scopes. attribution_rows.sql's last statement returns the launch check (run.py's
-- LaunchCheck): launches, device_events, launches_without_device_event, device_events_without_launch. `kernels` is in
-- no particular order: `profiling_df` sorts, so sorting here too would be paid twice.
--
-- Steps: device event -> its launch (same `correlation`; a CUDA graph replay's kernels all share the
-- cudaGraphLaunch's) -> the scopes and operators whose span holds the launch on the launching thread
-- (module scope, functional scope, innermost and outermost operator) -> one row. A CPU operator is held by
-- the spans that contain it on its thread, itself excepted, by the same nesting order. This file ends with the
-- launch points (ks_anchors); held.py finds the spans that hold each (ks_held: _held.c's sweep, or held_by_sql.sql's
-- range join where that extension is not built); attribution_rows.sql makes the rows.
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
-- there: the tables the statements after them read are made as such a trace has them, and the check is not set (a
-- statement that cost a small trace's load ~0.4 ms): the caller that answers that the trace holds no device work
-- knows its check is zeros, and reads none from attribution_rows.sql's last statement (the steps cost a small trace
-- ~5 ms of its ~40: benchmarks/RESULTS.md). frames_needed.sql tells whether a trace holds device work, and its caller (rank_parts.py)
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
-- held_by_sql.sql's ks_enclosers keeps only the operators that may hold a launch). Those of device events without a
-- launch, and whether their names have a namespace, are merged in after ks_items, which finds them.
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
    SELECT event_id, cat, ts_ns, dur_ns, correlation, external_id, device, stream, pid
    FROM events
    WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns >= 0 AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')
)
SELECT d.event_id,
       CASE d.cat WHEN 'kernel' THEN 'kernel' WHEN 'gpu_memcpy' THEN 'memcpy' ELSE 'memset' END AS kind,
       d.ts_ns, d.dur_ns, d.device, CASE WHEN d.pid = d.device THEN d.stream END AS stream, d.correlation,
       COALESCE(d.external_id, l.external_id) AS external_id,
       l.pid AS at_pid, coalesce(o.tid, l.tid) AS at_tid, l.ts_ns AS at_ns, false AS is_cpu_op, l.graph_launch_id,
       false AS namespaced, l.launch_id
FROM device_events d LEFT JOIN ks_launches l USING (correlation)
LEFT JOIN ks_ops_by_id o
  ON o.external_id = l.external_id AND o.pid = l.pid AND o.tid <> l.tid AND o.ts_ns <= l.ts_ns AND l.ts_ns < o.end_ns;

-- A trace without device work: its CPU operators, each its own launch point (its span, [ts_ns, ts_ns + dur_ns), 1 ns
-- when it lasts 0 ns: ks_anchors below) and its own operator (op_id), made at once as the points, which then hold the
-- item's columns too, under the names the points have (anchor: event_id; pid, tid, at_ns: where it ran): the rows of
-- ks_items and ks_anchors as the INSERT below and the statements after it give them to a trace with device work but
-- no device event; made as one table, not two (a statement of its own cost a small trace's load ~0.7 ms). Such a
-- trace makes no ks_items nor ks_ops_by_id: no statement it runs reads them.
-- run if: NOT coalesce(getvariable('ks_device_work'), true)
CREATE OR REPLACE TEMP TABLE ks_anchors AS
SELECT event_id AS anchor, pid, tid, ts_ns AS at_ns, ts_ns + greatest(dur_ns, 1) AS at_end_ns, event_id AS op_id,
       ts_ns + dur_ns AS op_end_ns, 'cpu' AS kind, dur_ns, CAST(NULL AS INTEGER) AS device,
       CAST(NULL AS INTEGER) AS stream, CAST(NULL AS BIGINT) AS correlation, CAST(NULL AS BIGINT) AS graph_launch_id,
       contains(name, '::') AS namespaced
FROM events
WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns >= 0 AND cat = 'cpu_op'
  AND NOT starts_with(name, getvariable('module_prefix'))
  AND NOT starts_with(name, getvariable('function_prefix'));

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
            device_events_without_launch: (SELECT count(*) FROM ks_items WHERE NOT is_cpu_op AND at_ns IS NULL),
            unplaced: (SELECT count(*) FROM ks_items WHERE NOT is_cpu_op AND (device IS NULL OR stream IS NULL))}
    FROM lost
);

-- A device event is placed where Kineto files a device's work: under the device's index as pid (its device arg), its
-- queue as tid (ingest.sql gives the tid for stream where the event has no stream arg: XPU's, roctracer's). ks_items
-- keeps the stream of those filed so (pid = device arg: every CUDA trace's); the others (no device arg, or filed under
-- another pid) are placed here, and the launch check counts them (unplaced), so this guard is asked with the guards of
-- the steps after it. Without a device arg (roctracer's kernels: pid 2, tid 0), a pid that is a device's
-- (ks_device_pid: device events and no operator or annotation) is its device. A tid is no stream where it is a host
-- thread's (its pid and tid hold operators, annotations or launches: torch's trace-analysis test files its kernels
-- on the thread of their operators, pid = tid = 1147039), nor, without a device arg, under a pid that is no
-- device's: neither is known. A stream or device arg is always kept.
-- run if: getvariable('ks_launch_check').unplaced > 0
UPDATE ks_items SET device = placed.device, stream = placed.stream
FROM (
    WITH unplaced AS (
        SELECT e.event_id, e.pid, e.tid, e.pid_name, e.device, e.stream, e.args
        FROM events e JOIN ks_items i USING (event_id) WHERE NOT i.is_cpu_op AND (i.device IS NULL OR i.stream IS NULL)
    ),
    pids AS (
        SELECT pid, ks_device_pid(cat) AS is_device FROM events WHERE pid IN (SELECT pid FROM unplaced) GROUP BY pid
    ),
    host_threads AS (
        SELECT DISTINCT pid, tid FROM events
        WHERE (cat IN ('cpu_op', 'user_annotation') OR ks_launch_category(cat))
          AND (pid, tid) IN (SELECT (pid, tid) FROM unplaced)
    )
    SELECT u.event_id,
           coalesce(u.device, CASE WHEN p.is_device AND u.pid_name IS NULL THEN TRY_CAST(u.pid AS INTEGER) END) AS device,
           CASE WHEN u.stream = u.tid AND (h.pid IS NOT NULL OR (u.device IS NULL AND NOT p.is_device))
                     AND NOT json_exists(u.args, '$.stream') THEN NULL
                ELSE u.stream END AS stream
    FROM unplaced u LEFT JOIN pids p USING (pid) LEFT JOIN host_threads h USING (pid, tid)
) placed
WHERE ks_items.event_id = placed.event_id;

-- A trace without device events: its operators. ks_items holds a row for each device event (the DELETE above keeps
-- one of each), which the launch check counted: this runs after it, its guard a variable's (asked in one SELECT with
-- those below it, where a guard of ks_items was a SELECT of its own); the check counts no CPU row. A trace without
-- device work made its CPU rows with ks_items above (its second guard, known to rank_parts.py, is asked after the first,
-- which is asked with those below it).
-- run if: getvariable('ks_launch_check').device_events = 0
-- run if: coalesce(getvariable('ks_device_work'), true)
INSERT INTO ks_items
SELECT event_id, 'cpu', ts_ns, dur_ns, NULL, NULL, NULL, NULL, pid, tid, ts_ns, true, NULL, contains(name, '::'), NULL
FROM events
WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns >= 0 AND cat = 'cpu_op'
  AND NOT starts_with(name, getvariable('module_prefix'))
  AND NOT starts_with(name, getvariable('function_prefix'));

-- A device event without a launch whose flow arrow the trace keeps was launched where the flow starts: an Ascend
-- trace's (npu_tasks.sql) flow from the operator that dispatched the task, a CUDA trace's from a launch the profiler
-- lost. The finish on the device event's (pid, tid) within it, as linked_by_flow.sql reads it ([start, start + dur),
-- its start where it lasts 0 ns: one range, so the join is a range join), and the start of its id and category; of
-- several (torch_npu's from the operator, CANN's from its API call), one on a thread that runs operators.
-- A flow that starts with a launch call (Kineto writes the start at the call's) and finishes on several device events
-- (a CUDA graph's launch, or a writer that gives the tasks it linked to no call the id of an earlier flow: torch_npu's
-- Kineto export) places one only where its stream allows: a stream runs its work in launch order, so a device event
-- after one launched later (by its launch, or by such a flow of one finish) was not launched at this flow's start, and
-- its launch is unknown. (A flow from an operator, as an Ascend trace's, starts when the operator does, not at its
-- launch: no order is read from it.)
-- Only where the launch check counted device events without a launch.
-- run if: getvariable('ks_launch_check').device_events_without_launch > 0
UPDATE ks_items AS i SET at_pid = p.start.pid, at_tid = p.start.tid, at_ns = p.start.ts_ns
FROM (
    WITH picked AS (
        SELECT d.event_id,
               arg_max({pid: s.pid, tid: s.tid, ts_ns: s.ts_ns, flow_id: f.flow_id, cat: f.cat},
                       ((s.pid, s.tid) IN (SELECT (pid, tid) FROM events WHERE cat = 'cpu_op'), -s.ts_ns)) AS pick
        FROM (SELECT i.event_id, e.pid, e.tid, e.ts_ns, e.ts_ns + greatest(e.dur_ns, 1) AS end_ns
              FROM ks_items i JOIN events e USING (event_id)
              WHERE i.at_ns IS NULL AND NOT i.is_cpu_op) d
        JOIN events f ON f.ph = 'f' AND f.pid = d.pid AND f.tid = d.tid AND f.ts_ns >= d.ts_ns AND f.ts_ns < d.end_ns
        JOIN events s ON s.ph = 's' AND s.flow_id = f.flow_id AND s.cat IS NOT DISTINCT FROM f.cat
                     AND s.pid IS NOT NULL AND s.tid IS NOT NULL AND s.ts_ns IS NOT NULL
        GROUP BY d.event_id
    ),
    fan_outs AS (SELECT flow_id, cat FROM events WHERE ph = 'f' GROUP BY flow_id, cat HAVING count(*) > 1),
    launch_starts AS (  -- Kineto writes a flow's start at its launch call's start
        SELECT DISTINCT pid, tid, ts_ns FROM events WHERE ph = 'X' AND ks_launch_category(cat)
    ),
    placed AS (
        SELECT p.event_id, {pid: p.pick.pid, tid: p.pick.tid, ts_ns: p.pick.ts_ns} AS start,
               l.ts_ns IS NOT NULL AS at_launch, o.flow_id IS NOT NULL AS shared
        FROM picked p
        LEFT JOIN launch_starts l ON l.pid = p.pick.pid AND l.tid = p.pick.tid AND l.ts_ns = p.pick.ts_ns
        LEFT JOIN fan_outs o ON o.flow_id = p.pick.flow_id AND o.cat IS NOT DISTINCT FROM p.pick.cat
    ),
    in_stream_order AS (
        SELECT p.event_id, p.start, p.at_launch AND p.shared AS checked,
               max(CASE WHEN p.event_id IS NULL THEN i.at_ns WHEN p.at_launch AND NOT p.shared THEN p.start.ts_ns END)
                   OVER (PARTITION BY e.pid, e.tid ORDER BY e.ts_ns, e.event_id
                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS launched_before
        FROM ks_items i JOIN events e USING (event_id) LEFT JOIN placed p USING (event_id)
        WHERE NOT i.is_cpu_op
    )
    SELECT event_id, start FROM in_stream_order
    WHERE start IS NOT NULL AND NOT (checked AND coalesce(launched_before > start.ts_ns, false))
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

-- The points and spans whose holders the attribution reads: a launch point is held where the spans of its thread
-- hold [at_ns, at_ns + 1); a CPU operator (op_id) is held where they hold its own span ([at_ns, at_end_ns), 1 ns
-- when it lasts 0 ns), by a span that comes before it in nesting order (not itself, nor an identical span later
-- in the trace, which it holds: see held_by_sql.sql, ks_innermost). A device event whose launch the trace lacks (the
-- profiler lost the runtime call, or the trace was cut) is held as the operator its External id names is: that
-- operator made the launch, so the spans that hold it held the launch (those inside it may not have). A point's key
-- (anchor) is the least event id of its rows (an operator's: its own), an aggregate that runs on every thread
-- (numbering the points with row_number() ran on one: 0.1 s of a 1 GB trace at any core count); event ids are
-- unique, so no two points share one.
-- run if: coalesce(getvariable('ks_device_work'), true)
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

-- The spans that may hold a launch point, for held.py (held_spans.sql, held_by_sql.sql): scopes (kind 0 module, 1
-- function) and operators (2) of positive length. A plain trace's scopes are its Python frames (frames.sql,
-- ks_frame_scopes), named there. Made only where missing: a small run's connection, kept for the next run
-- (connection.py), keeps it (its DROP below held back), and making it again cost that run ~0.5 ms of binding.
CREATE TEMP VIEW IF NOT EXISTS ks_spans AS
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
SELECT event_id, pid, tid, ts_ns, end_ns, name, true, kind FROM ks_frame_scopes;

DROP TABLE IF EXISTS ks_launches;
