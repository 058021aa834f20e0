-- archive_list.sql: one line per archived run (`kernelscope runs`), oldest first, a run of no start time (a bare
-- trace) before all: the table's newest --top-k are the newest dated runs. Per-rank fields are rank 0's (the lowest
-- rank's), hosts are all of them.
SELECT
    run_id,
    arg_min(name, rank)                                   AS name,
    min(start_time)                                       AS start_time,
    CAST(count(*) AS INTEGER)                             AS ranks,
    string_agg(DISTINCT hostname, ',' ORDER BY hostname)  AS hosts,
    arg_min(device, rank)                                 AS device,
    arg_min(gpu_name, rank)                               AS gpu_name,
    arg_min(torch_version, rank)                          AS torch_version,
    arg_min(cuda_version, rank)                           AS cuda_version,
    arg_min(git_commit, rank)                             AS git_commit,
    CAST(arg_min(tags, rank) AS VARCHAR)                  AS tags,
    CAST(sum(kernels) AS BIGINT)                          AS kernels,
    sum(kernel_us)                                        AS kernel_us
FROM runs
GROUP BY run_id
ORDER BY start_time NULLS FIRST, run_id
