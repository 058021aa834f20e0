-- sample_costs.sql: view `sample_costs`, what each distinct input signature of a functional call cost (per rank):
-- its calls, the device time of the kernels its calls launched, per call, and its share of the function's time.
-- The signatures worth a kernel of their own are the costly ones. A signature whose calls launched no kernel costs 0.
SELECT s.rank, s.function_name, s.sample_id, s.signature, s.calls, s.tensor_bytes,
       coalesce(k.kernels, 0)                                   AS kernels,
       coalesce(k.time_us, 0.0)                                 AS time_us,
       coalesce(k.time_us, 0.0) / s.calls                       AS us_per_call,
       CASE WHEN sum(coalesce(k.time_us, 0.0)) OVER (PARTITION BY s.rank, s.function_name) > 0
            THEN 100.0 * coalesce(k.time_us, 0.0) / sum(coalesce(k.time_us, 0.0)) OVER (PARTITION BY s.rank, s.function_name)
            ELSE 0.0 END                                        AS function_pct
FROM samples s
LEFT JOIN (
    SELECT rank, function_name, sample_id, count(*) AS kernels, sum(kernel_us) AS time_us
    FROM kernels
    WHERE sample_id IS NOT NULL
    GROUP BY ALL
) k USING (rank, function_name, sample_id)
ORDER BY s.rank, s.function_name, time_us DESC, s.sample_id
