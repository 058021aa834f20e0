-- module_calls.sql: the leaves of the module tree (view `module_calls`, `kernelscope tree --show-calls`): per rank
-- and module, the rows whose innermost module it is, by functional call (kernel NULL), and each call's by kernel;
-- calls most expensive first, each followed by its kernels. Rows outside any module are the root's (''), as in
-- tree.sql; rows outside any call have function_name NULL.
-- The placeholder `kernels`: the rows to read, as in tree.sql.
WITH
groups AS (
    SELECT rank, coalesce(module_name, '') AS module, function_name, kernel, GROUPING(kernel) = 1 AS is_call,
           sum(kernel_us) AS time_us, count(*) AS kernels
    FROM ${kernels}
    GROUP BY GROUPING SETS ((rank, module, function_name), (rank, module, function_name, kernel))
),
totals AS (
    SELECT rank, sum(kernel_us) AS total_us FROM ${kernels} GROUP BY rank
)
SELECT g.rank, g.module, g.function_name, g.kernel, g.time_us,
       CASE WHEN t.total_us > 0 THEN 100.0 * g.time_us / t.total_us ELSE 0.0 END AS share_pct,
       CAST(g.kernels AS BIGINT) AS kernels
FROM groups g
JOIN totals t ON t.rank IS NOT DISTINCT FROM g.rank
JOIN (SELECT rank, module, function_name, time_us AS call_us FROM groups WHERE is_call) c
  ON c.rank IS NOT DISTINCT FROM g.rank AND c.module = g.module AND c.function_name IS NOT DISTINCT FROM g.function_name
ORDER BY g.rank, g.module, c.call_us DESC, g.function_name NULLS LAST, NOT g.is_call, g.time_us DESC, g.kernel
