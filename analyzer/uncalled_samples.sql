-- uncalled_samples.sql: the functions of a recording's sample store (table samples) that no call scope of its trace
-- names, per rank (Run.notes): files of two runs put together, a trace cut short before their calls, or calls a
-- recording sampled without a scope. Their samples stay in table samples and function_data; no row of kernels is
-- theirs. A call scope names "<function>" or "<function><sample_separator><sample id>" (scope_names.sql). Returns
-- rank, function_name, calls.
WITH called AS (
    SELECT DISTINCT rank, ks_scope_call(name) AS label
    FROM events
    WHERE starts_with(name, getvariable('function_prefix'))
)
SELECT rank, function_name, sum(calls) AS calls
FROM samples
WHERE NOT EXISTS (
    SELECT 1 FROM called
    WHERE called.rank = samples.rank
      AND (label = function_name OR starts_with(label, function_name || getvariable('sample_separator')))
)
GROUP BY rank, function_name
ORDER BY rank, function_name
