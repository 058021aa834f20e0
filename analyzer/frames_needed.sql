-- frames_needed.sql: whether frames.sql has scopes to find: the trace holds Python frames and no kernelscope scope
-- (a kernelscope recording made with with_stack keeps its own). Creates the empty ks_frame_scopes that attribution.sql
-- reads where it has not: the statements of frame_names.sql and frames.sql have a fixed cost even on an empty trace.
CREATE OR REPLACE TEMP TABLE ks_frame_scopes (
    event_id BIGINT, pid BIGINT, tid BIGINT, ts_ns BIGINT, end_ns BIGINT, kind UTINYINT, name VARCHAR
);
-- The scopes' names attribution.sql reads: the events' own, where frames.sql gives no frame a scope's name (a view:
-- its plan is that of its query, with no join of ks_frame_scopes, empty, in every trace without frames).
CREATE OR REPLACE TEMP VIEW ks_scope_names AS SELECT event_id, name FROM events;
-- And, as device_work, whether the trace holds a device event or a runtime or driver call that may launch one, in
-- any phase: the answer to the guards of attribution.sql's launch steps, asked here, in a statement that runs anyway,
-- as one more subquery instead of a statement of its own. (Whether it holds a device event that attribution.sql makes
-- a row of is not asked here: Kineto writes the device events last, so that subquery read most of a large trace's
-- events, +4.6 ms at 100 MB, where a runtime call comes early.)
SELECT EXISTS (SELECT 1 FROM events WHERE cat = 'python_function')
       AND NOT EXISTS (
           SELECT 1 FROM events
           WHERE cat IN ('cpu_op', 'user_annotation')
             AND (starts_with(name, getvariable('module_prefix')) OR starts_with(name, getvariable('function_prefix')))
       ) AS frames_needed,
       EXISTS (
           SELECT 1 FROM events WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') OR ks_launch_category(cat)
       ) AS device_work
