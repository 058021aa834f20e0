-- held_native.sql: table ks_held (held_by_sql.sql says what it holds) from the native sweep's columns, which held.py
-- holds as ks_held_swept (a dict of NumPy arrays, read by its name), where -1 is no span.
CREATE OR REPLACE TEMP TABLE ks_held AS
SELECT anchor, nullif(module_id, -1) AS module_id, nullif(function_id, -1) AS function_id,
       nullif(inner_op_id, -1) AS inner_op_id, nullif(outer_op_id, -1) AS outer_op_id,
       nullif(inside_op_id, -1) AS inside_op_id, nullif(inside_namespaced_op_id, -1) AS inside_namespaced_op_id
FROM ks_held_swept;
