-- torchscript_modules.sql: in a recording of TorchScript modules (variable torchscript_paths: the manifest's
-- annotation.torchscript_modules, docs/format.md), the module each row's operator ran in, set in table `kernels`:
-- the path its Module Hierarchy names (each "name(Class)::method." after TOP's; TorchScript functions' "::name."
-- frames between them are not modules) mapped to its module, where the row's module scope (the root's where none)
-- is that TorchScript module's. Runs after attribution.sql, on its ks_rows and ks_modules, only where the variable
-- holds paths (run.py): other traces pay nothing for it.
UPDATE kernels k SET module_name = s.module_name
FROM (
    WITH paths AS (
        SELECT p.scope, p.path, p.module FROM (SELECT unnest(getvariable('torchscript_paths')) AS p)
    ),
    held AS (
        SELECT r.event_id, coalesce(m.module_name, '') AS scope,
               array_to_string(regexp_extract_all(json_extract_string(e.args, '$."Module Hierarchy"'),
                                                  '\.([^.()]*\([^()]*\))::', 1), '.') AS path
        FROM ks_rows r
        LEFT JOIN ks_modules m ON m.event_id = r.module_id
        JOIN events e ON e.event_id = r.op_id
        WHERE contains(e.args, '"Module Hierarchy"')
    )
    SELECT h.event_id, p.module AS module_name FROM held h JOIN paths p USING (scope, path)
) s
WHERE k.event_id = s.event_id;
