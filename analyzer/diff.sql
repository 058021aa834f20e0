-- diff.sql: run B against run A (relations side_a, side_b from diff_side.sql), one row per (level, name)
-- present in either; most changed first within each level (total, function, module, kernel).
-- delta_pct and ratio are +inf for what is new in B, NULL where both are 0.
SELECT
    coalesce(a.level, b.level)                                    AS level,
    coalesce(a.name, b.name)                                      AS name,
    coalesce(a.time_us, 0.0)                                      AS time_a_us,
    coalesce(b.time_us, 0.0)                                      AS time_b_us,
    coalesce(b.time_us, 0.0) - coalesce(a.time_us, 0.0)           AS delta_us,
    CASE WHEN coalesce(a.time_us, 0.0) > 0 THEN 100.0 * (coalesce(b.time_us, 0.0) - a.time_us) / a.time_us
         WHEN coalesce(b.time_us, 0.0) > 0 THEN CAST('inf' AS DOUBLE) END AS delta_pct,
    CASE WHEN coalesce(a.time_us, 0.0) > 0 THEN coalesce(b.time_us, 0.0) / a.time_us
         WHEN coalesce(b.time_us, 0.0) > 0 THEN CAST('inf' AS DOUBLE) END AS ratio,
    coalesce(a.share_pct, 0.0)                                    AS share_a_pct,
    coalesce(b.share_pct, 0.0)                                    AS share_b_pct,
    a.calls                                                       AS calls_a,
    b.calls                                                       AS calls_b
FROM side_a a
FULL JOIN side_b b ON a.level = b.level AND a.name IS NOT DISTINCT FROM b.name  -- NULL: outside any
ORDER BY list_position(['total', 'function', 'module', 'kernel'], coalesce(a.level, b.level)), abs(delta_us) DESC,
         coalesce(a.name, b.name) NULLS FIRST
