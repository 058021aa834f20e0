-- diff_side.sql: one run's totals for `diff`, one row per (level, name):
--   level 'total' (name NULL), 'function' (innermost functional call), 'module' (innermost module),
--   'kernel' (kernel name); name NULL at function/module level = outside any.
--   time_us: kernel time (what summary calls time_spent_us, for functions); share_pct: of the run's total;
--   calls: functional calls / module forward calls (their scope events; graph replays named by their launch:
--   their launches; calls named after an operator: its events), launches for kernels and the total.
-- Variables: module_prefix, function_prefix, sample_separator, graph_replay_call, other_operator_call; macros of
-- scope_names.sql.
WITH
scopes AS (
    SELECT ks_scope_module(name) AS module, ks_scope_call(name) AS call  -- a folded call scope has both
    FROM events
    WHERE ph = 'X' AND cat IN ('cpu_op', 'user_annotation')
      AND (starts_with(name, getvariable('module_prefix')) OR starts_with(name, getvariable('function_prefix')))
),
scope_calls AS (
    SELECT 'module' AS level, module AS name, count(*) AS calls FROM scopes WHERE module IS NOT NULL GROUP BY ALL
    UNION ALL
    SELECT 'function', regexp_replace(call, getvariable('sample_separator') || '[0-9]+$', ''), count(*)
    FROM scopes WHERE call IS NOT NULL GROUP BY ALL
    UNION ALL  -- graph replays named by their launch (attribution.sql): one correlation per launch and rank
    SELECT 'function', function_name, count(DISTINCT (rank, correlation))
    FROM kernels
    WHERE function_name = getvariable('graph_replay_call') AND sample_id IS NULL AND correlation IS NOT NULL
    GROUP BY ALL
    UNION ALL  -- calls named after an operator (attribution.sql): the operator events, per rank
    SELECT 'function', function_name, count(DISTINCT (rank, call_event_id))
    FROM kernels
    WHERE (contains(function_name, '::') OR function_name = getvariable('other_operator_call'))
      AND call_event_id IS NOT NULL
    GROUP BY ALL
),
times AS (
    SELECT 'total' AS level, CAST(NULL AS VARCHAR) AS name, sum(kernel_us) AS time_us, count(*) AS launches
    FROM kernels
    UNION ALL
    SELECT 'function', function_name, sum(kernel_us), count(*) FROM kernels GROUP BY function_name
    UNION ALL
    SELECT 'module', module_name, sum(kernel_us), count(*) FROM kernels GROUP BY module_name
    UNION ALL
    SELECT 'kernel', kernel, sum(kernel_us), count(*) FROM kernels GROUP BY kernel
)
SELECT
    t.level,
    t.name,
    coalesce(t.time_us, 0.0)                                                         AS time_us,
    CASE WHEN sum(t.time_us) FILTER (WHERE t.level = 'total') OVER () > 0
         THEN 100.0 * t.time_us / sum(t.time_us) FILTER (WHERE t.level = 'total') OVER () ELSE 0.0 END
                                                                                     AS share_pct,
    CAST(CASE WHEN t.level IN ('total', 'kernel') THEN t.launches ELSE s.calls END AS BIGINT) AS calls
FROM times t
LEFT JOIN scope_calls s ON s.level = t.level AND s.name = t.name
