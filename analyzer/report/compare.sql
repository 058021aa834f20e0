-- compare.sql: what the comparison page shows of `diff` (diff.sql's rows, registered as relation diff_rows) per
-- level: the total, then the functions, modules (innermost) and kernels: of each level the 60 that changed most
-- (either way), the regressions (the largest growth) first; `change` says which way: worse (B took longer),
-- better, same. Needs kernel_short (kernel_names.sql).
CREATE OR REPLACE TEMP VIEW ks_compare_rows AS
SELECT level, name,
       CASE WHEN level = 'kernel' AND name IS NOT NULL THEN kernel_short(name)
            WHEN name IS NULL AND level <> 'total' THEN '(outside any ' || level || ')'
            WHEN level = 'module' AND name = '' THEN '(root)'  -- as kernelscope diff's table names it
            ELSE coalesce(name, 'total') END AS label,
       time_a_us, time_b_us, delta_us, delta_pct, ratio, share_a_pct, share_b_pct, calls_a, calls_b,
       CASE WHEN delta_us > 0 THEN 'worse' WHEN delta_us < 0 THEN 'better' ELSE 'same' END AS change,
       count(*) OVER (PARTITION BY level) AS level_rows
FROM diff_rows
QUALIFY row_number() OVER (PARTITION BY level ORDER BY abs(delta_us) DESC, name NULLS FIRST) <= 60
ORDER BY list_position(['total', 'function', 'module', 'kernel'], level), delta_us DESC, name NULLS FIRST;

-- The functions that changed most, either way (the bar chart).
CREATE OR REPLACE TEMP VIEW ks_compare_chart AS
SELECT coalesce(name, '(outside any function)') AS label, time_a_us, time_b_us, delta_us,
       CASE WHEN delta_us > 0 THEN 'worse' WHEN delta_us < 0 THEN 'better' ELSE 'same' END AS change
FROM diff_rows
WHERE level = 'function'
ORDER BY abs(delta_us) DESC, name NULLS FIRST
LIMIT 20;
