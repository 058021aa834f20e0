-- summary.sql: one row per functional call, most expensive first (describe_results / `summary`).
-- Reads `kernels` (rows with a function_name count) and `sample_totals` (function_name, calls,
-- num_distinct_samples, tensor_bytes: only functions whose samples were collected; the others get NULL,
-- which pandas shows as NaN). time_spent_pct is the share of all functions' time, top_k cut or not.
SELECT function_name, calls, num_distinct_samples, num_modules, time_spent_us, time_spent_pct, tensor_size_MB
FROM (
    SELECT
        k.function_name,
        CAST(s.calls AS DOUBLE)                                 AS calls,
        CAST(s.num_distinct_samples AS DOUBLE)                  AS num_distinct_samples,
        k.num_modules,
        k.time_spent_us,
        CASE WHEN sum(k.time_spent_us) OVER () > 0
             THEN 100.0 * k.time_spent_us / sum(k.time_spent_us) OVER () ELSE 0.0 END AS time_spent_pct,
        s.tensor_bytes / 1048576.0                              AS tensor_size_MB,
        row_number() OVER (ORDER BY k.time_spent_us DESC, k.function_name) AS rank
    FROM (
        SELECT function_name,
               CAST(count(DISTINCT module_name) AS BIGINT) AS num_modules,
               CAST(sum(kernel_us) AS DOUBLE)             AS time_spent_us
        FROM kernels
        WHERE function_name IS NOT NULL
        GROUP BY function_name
    ) k
    LEFT JOIN sample_totals s USING (function_name)
)
WHERE rank <= getvariable('top_k')
ORDER BY rank
