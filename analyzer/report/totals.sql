-- totals.sql: the report's header numbers of a run (both pages): its device time and rows, the share inside a
-- named call and inside a module, how many ranks, functions, modules and distinct kernels, of ${kernels}: all
-- ranks together, or one rank's (one_rank.sql; substituted by views.py); and whether the trace holds scopes of the
-- run's prefixes (a plain trace has none: its calls are named from the trace).
CREATE OR REPLACE TEMP VIEW ks_report_totals AS
SELECT coalesce(sum(kernel_us), 0.0) AS total_us,
       count(*) AS rows,
       count(DISTINCT rank) AS ranks,
       CASE WHEN sum(kernel_us) > 0
            THEN 100.0 * coalesce(sum(kernel_us) FILTER (WHERE function_name IS NOT NULL), 0.0) / sum(kernel_us)
            ELSE 0.0 END AS named_pct,
       CASE WHEN sum(kernel_us) > 0
            THEN 100.0 * coalesce(sum(kernel_us) FILTER (WHERE module_name IS NOT NULL), 0.0) / sum(kernel_us)
            ELSE 0.0 END AS in_module_pct,
       count(DISTINCT function_name) AS functions,
       count(DISTINCT module_name) AS modules,
       count(DISTINCT kernel) AS distinct_kernels,
       EXISTS (SELECT 1 FROM events
               WHERE starts_with(name, getvariable('module_prefix'))
                  OR starts_with(name, getvariable('function_prefix'))) AS scoped
FROM ${kernels};
