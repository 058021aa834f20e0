-- frame_scopes.sql: the empty ks_frame_scopes that attribution.sql reads where frames.sql (a plain trace's Python
-- frames as its scopes: frames_needed.sql) has not made it: the statements of frame_names.sql and frames.sql have a
-- fixed cost even on an empty trace.
CREATE OR REPLACE TEMP TABLE ks_frame_scopes (
    event_id BIGINT, pid BIGINT, tid BIGINT, ts_ns BIGINT, end_ns BIGINT, kind UTINYINT, name VARCHAR
);
-- The scopes' names attribution.sql reads: the events' own, where frames.sql gives no frame a scope's name (a view:
-- its plan is that of its query, with no join of ks_frame_scopes, empty, in every trace without frames).
CREATE OR REPLACE TEMP VIEW ks_scope_names AS SELECT event_id, name FROM events;
