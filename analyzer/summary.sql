-- summary.sql: one row per named call, most expensive first (describe_results / `summary`).
-- Reads ${kernels} (rows with a function_name count) and ${sample_totals} (function_name, calls,
-- num_distinct_samples, tensor_bytes: only functions whose samples were collected; the others get NULL,
-- which pandas shows as NaN). time_spent_pct is the share of all functions' time, top_k cut or not.
-- The placeholders are `kernels` and `sample_totals`, or one rank's (report/one_rank.sql), substituted by summary.py.
-- CUDA graph replays named by their launch (${graph_replay_call}, run format 3) have no samples: their
-- calls are their launches, one correlation per launch (per rank) shared by the kernels it ran. Calls named after
-- an operator (attribution.sql's trace rule: a name with "::", or ${other_operator_call}) have none either: their
-- calls are the operator events they are named after (call_event_id, per rank), however many rows each owns.
SELECT function_name, calls, num_distinct_samples, num_modules, time_spent_us, time_spent_pct, tensor_size_MB
FROM (
    SELECT
        k.function_name,
        CAST(coalesce(s.calls, nullif(k.replays, 0), nullif(k.operator_calls, 0)) AS DOUBLE) AS calls,
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
               CAST(sum(kernel_us) AS DOUBLE)             AS time_spent_us,
               count(DISTINCT (rank, correlation)) FILTER (WHERE function_name = ${graph_replay_call}
                                                           AND correlation IS NOT NULL) AS replays,
               count(DISTINCT (rank, call_event_id))
                   FILTER (WHERE (contains(function_name, '::') OR function_name = ${other_operator_call})
                                 AND call_event_id IS NOT NULL)   AS operator_calls
        FROM ${kernels}
        WHERE function_name IS NOT NULL
        GROUP BY function_name
    ) k
    LEFT JOIN ${sample_totals} s USING (function_name)
)
WHERE rank <= getvariable('top_k')
ORDER BY rank
