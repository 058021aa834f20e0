-- attribution_rows.sql: the attribution's last steps (attribution.sql says what the whole does): each result row's
-- scopes and operators from ks_held (held.py), their names, and table `kernels`; returns the launch check.

-- Per result row, the event ids of its scopes and operators. Its operator (op_id): the one its External id
-- names, else the innermost one holding its launch; a CPU row's is itself, and the innermost one holding it is its
-- parent (parent_op_id). Its call's operator (call_op_id: the outermost one in its call scope, or of all outside
-- one) and, outside any call scope, the operator the trace rule names its call after (named_op_id, where the
-- variable other_operator_call turns that rule on: the outermost one with a namespace in its module scope, or of all
-- outside one, else the outermost one there): a row held as an operator (held_op_id: a CPU row, and a device event
-- without a launch, ks_anchors) holds that operator for both. A device event without a launch was launched from its
-- operator's thread (at_pid, at_tid); its at_ns stays NULL. It keeps only the columns the statements after it read
-- (each of their scans reads every column of it, the lean plan keeping all).
-- run if: coalesce(getvariable('ks_device_work'), true)
CREATE OR REPLACE TEMP TABLE ks_rows AS
SELECT it.event_id, it.kind, it.ts_ns, it.dur_ns, it.device, it.stream, it.correlation, it.at_tid, it.graph_launch_id,
       h.module_id, h.function_id,
       CASE WHEN it.is_cpu_op THEN it.event_id ELSE coalesce(it.external_op_id, h.inner_op_id) END AS op_id,
       CASE WHEN it.is_cpu_op THEN h.inner_op_id END AS parent_op_id,
       coalesce(CASE WHEN h.function_id IS NULL THEN h.outer_op_id ELSE h.inside_op_id END, it.held_op_id)
           AS call_op_id,
       CASE WHEN h.function_id IS NULL AND getvariable('other_operator_call') IS NOT NULL
            THEN coalesce(h.inside_namespaced_op_id, CASE WHEN it.held_op_namespaced THEN it.held_op_id END,
                          h.inside_op_id, it.held_op_id) END AS named_op_id
FROM (SELECT it.* REPLACE (coalesce(it.at_pid, obi.pid) AS at_pid, coalesce(it.at_tid, obi.tid) AS at_tid),
             obi.op_id AS external_op_id,
             CASE WHEN it.is_cpu_op THEN it.event_id WHEN it.at_ns IS NULL THEN obi.op_id END AS held_op_id,
             CASE WHEN it.is_cpu_op THEN it.namespaced WHEN it.at_ns IS NULL THEN obi.namespaced END
                 AS held_op_namespaced,
             CASE WHEN it.at_ns IS NULL AND NOT it.is_cpu_op THEN obi.ts_ns ELSE it.at_ns END AS held_ns
      FROM ks_items it LEFT JOIN ks_ops_by_id obi ON obi.external_id = it.external_id) it
LEFT JOIN ks_anchors a
  ON a.pid = it.at_pid AND a.tid = it.at_tid AND a.at_ns = it.held_ns AND a.op_id IS NOT DISTINCT FROM it.held_op_id
LEFT JOIN ks_held h USING (anchor);

-- A trace without device work: every item is a CPU operator, its own operator and its own point (attribution.sql
-- made its items as ks_anchors: anchor and op_id its event id), held by the spans ks_held gives that point where it
-- has a thread and a time; the same columns as above without the joins whose inputs such a trace leaves empty or one
-- to one (each join costs a small trace's load its fixed part of a millisecond).
-- Its dur_ns is already the row's self time (the UPDATE of `kernels` below, for the CPU rows of a trace with device
-- work, costs a small trace's load ~1.6 ms, a join to its children's sum here less).
-- run if: NOT coalesce(getvariable('ks_device_work'), true)
CREATE OR REPLACE TEMP TABLE ks_rows AS
SELECT it.anchor AS event_id, it.kind, it.at_ns AS ts_ns, it.dur_ns - coalesce(c.children_ns, 0) AS dur_ns, it.device,
       it.stream, it.correlation, it.tid AS at_tid, it.graph_launch_id,
       h.module_id, h.function_id, it.anchor AS op_id, h.inner_op_id AS parent_op_id,
       coalesce(CASE WHEN h.function_id IS NULL THEN h.outer_op_id ELSE h.inside_op_id END, it.anchor) AS call_op_id,
       CASE WHEN h.function_id IS NULL AND getvariable('other_operator_call') IS NOT NULL
            THEN coalesce(h.inside_namespaced_op_id, CASE WHEN it.namespaced THEN it.anchor END, h.inside_op_id,
                          it.anchor) END AS named_op_id
FROM ks_anchors it
LEFT JOIN ks_held h ON h.anchor = it.anchor AND it.pid IS NOT NULL AND it.tid IS NOT NULL AND it.at_ns IS NOT NULL
LEFT JOIN (SELECT h.inner_op_id AS event_id, sum(it.dur_ns) AS children_ns
           FROM ks_anchors it JOIN ks_held h
             ON h.anchor = it.anchor AND it.pid IS NOT NULL AND it.tid IS NOT NULL AND it.at_ns IS NOT NULL
           WHERE h.inner_op_id IS NOT NULL
           GROUP BY ALL) c
  ON c.event_id = it.anchor;
DROP TABLE IF EXISTS ks_items;
DROP TABLE ks_anchors;
DROP TABLE ks_held;
DROP TABLE IF EXISTS ks_ops_by_id;

-- The names of the operators rows point to: their own, their call's and the one their call is named after. The ids
-- go to the semi join as they come (UNION ALL), which takes repeats as they are: a UNION's aggregates to drop them
-- cost a small trace's load ~0.3 ms, and a 100 MB trace's statement no less.
CREATE OR REPLACE TEMP TABLE ks_names AS
SELECT event_id, name FROM events
WHERE event_id IN (SELECT op_id FROM ks_rows UNION ALL SELECT call_op_id FROM ks_rows
                   UNION ALL SELECT named_op_id FROM ks_rows);

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
-- named passes on only the columns read below, not r.*: every join's chunks hold each column it passes on, which cost
-- a small trace's statement more than its joins (0.5 of 4 ms: the lean plan keeps columns nobody reads).
CREATE OR REPLACE TABLE kernels AS
WITH named AS (
    SELECT r.event_id, r.kind, r.ts_ns, r.dur_ns, r.device, r.stream, r.correlation, r.at_tid,
           m.module_name, f.sample_id, o.name AS op, co.name AS call_op,
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
-- events has CPU rows: a step of its own (rather than a join of every trace's `kernels`) costs the others a guard. A
-- trace without device work has them from ks_rows.
-- run if: getvariable('ks_launch_check').device_events = 0
-- run if: coalesce(getvariable('ks_device_work'), true)
UPDATE kernels k SET kernel_us = (s.dur_ns - s.children_ns) / 1000.0
FROM (SELECT r.event_id, r.dur_ns, c.children_ns
      FROM ks_rows r
      JOIN (SELECT parent_op_id AS event_id, sum(dur_ns) AS children_ns FROM ks_rows
            WHERE parent_op_id IS NOT NULL GROUP BY ALL) c USING (event_id)) s
WHERE k.event_id = s.event_id;

-- ks_rows, ks_modules and ks_functions are dropped by attribution_end.sql, after torchscript_modules.sql where a
-- recording has TorchScript modules, and the statement below, which reads ks_functions.
DROP TABLE ks_names;
DROP VIEW ks_spans;
DROP TABLE ks_frame_scopes;
DROP VIEW ks_scope_names;
-- The launch check, and the call scopes' samples that `kernels` names, each (function_name, sample_id) once, which
-- rank_parts.py checks against samples.json: ks_functions holds every row's call scope that names a sample, and the
-- same pair `kernels` has (a SELECT of its own over `kernels` cost a small trace's load ~0.5 ms).
SELECT c.launches, c.device_events, c.launches_without_device_event,
       c.device_events_without_launch
       - CASE WHEN c.device_events_without_launch > 0 THEN getvariable('ks_flow_launched') ELSE 0 END,
       (SELECT list(DISTINCT (function_name, sample_id)) FROM ks_functions WHERE sample_id IS NOT NULL)
FROM (SELECT getvariable('ks_launch_check') AS c);
