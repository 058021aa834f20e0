-- breakdown.sql: device time by one column of `kernels` (op, module_name, kernel, call_op), most
-- expensive first; the NULL group (no such scope) is kept, so the shares add up to 100.
-- ${column} is substituted from a fixed list by the caller, never from user input; ${where} is empty or a filter
-- on an integer rank.
SELECT ${column}, count(*) AS kernels, sum(kernel_us) AS time_spent_us,
       CASE WHEN sum(sum(kernel_us)) OVER () > 0
            THEN 100.0 * sum(kernel_us) / sum(sum(kernel_us)) OVER () ELSE 0.0 END AS time_spent_pct
FROM kernels
${where}
GROUP BY ${column}
ORDER BY time_spent_us DESC, ${column} NULLS LAST
LIMIT ${top_k}
