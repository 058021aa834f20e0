-- archive_row.sql: the `runs` row of one rank of a run being archived, from its manifest (variable
-- `manifest`, JSON text, 'null' for a bare trace) and what the analyzer measured (its `kernels` rows of
-- `rank`, its launch check, the rows of each of its tables, which the reader checks each file against). Fields a
-- manifest lacks are NULL, but a bare trace's start_time: ranks.trace_start.
WITH m AS (SELECT CAST(getvariable('manifest') AS JSON) AS j)
SELECT
    getvariable('name')                                            AS name,
    getvariable('source')                                          AS source,
    CAST(getvariable('archived_at') AS TIMESTAMPTZ)                AS archived_at,
    coalesce(TRY_CAST(j->>'start_time' AS TIMESTAMPTZ), TRY_CAST(getvariable('trace_start') AS TIMESTAMPTZ)) AS start_time,
    j->>'hostname'                                                 AS hostname,
    COALESCE(j->>'device', getvariable('device'))                  AS device,
    j->>'gpu_name'                                                 AS gpu_name,
    j->>'torch_version'                                            AS torch_version,
    j->>'cuda_version'                                             AS cuda_version,
    j->>'python_version'                                           AS python_version,
    j->>'platform'                                                 AS platform,
    j->>'kernelscope_version'                                      AS kernelscope_version,
    COALESCE(TRY_CAST(j->>'world_size' AS INTEGER), 1)             AS world_size,
    j->>'backend'                                                  AS backend,
    j->>'git_commit'                                               AS git_commit,
    CAST(j->'command_line' AS VARCHAR[])                           AS command_line,
    COALESCE(j->'tags', CAST('{}' AS JSON))                                      AS tags,
    getvariable('module_prefix')                                   AS module_prefix,
    getvariable('function_prefix')                                 AS function_prefix,
    (SELECT count(*) FROM kernels WHERE rank = getvariable('rank'))                      AS kernels,
    (SELECT coalesce(sum(kernel_us), 0) FROM kernels WHERE rank = getvariable('rank'))  AS kernel_us,
    (SELECT count(*) FROM events WHERE rank = getvariable('rank'))                       AS events,
    (SELECT count(*) FROM samples WHERE rank = getvariable('rank'))                      AS samples,
    CAST(getvariable('launches') AS BIGINT)                        AS launches,
    CAST(getvariable('device_events') AS BIGINT)                   AS device_events,
    CAST(getvariable('launches_without_device_event') AS BIGINT)   AS launches_without_device_event,
    CAST(getvariable('device_events_without_launch') AS BIGINT)    AS device_events_without_launch,
    j                                                              AS manifest
FROM m
