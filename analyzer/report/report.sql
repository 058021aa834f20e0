-- report.sql: what the HTML report shows of a run, as temporary views (the page computes nothing of its own).
-- Reads ${kernels}, ${summary}, ${sample_costs} (the run's views, all ranks of a job together, or one rank's:
-- one_rank.sql; substituted by views.py) and ks_report_tree (tree_shown.sql of the same rows with their calls and
-- kernels, created by views.py); needs kernel_short (kernel_names.sql).

-- The icicle: module -> call -> kernel, with the children under the report's threshold folded into one node.
-- The chart sizes a node by its children's sum and its own value, so a node with children has value 0.
CREATE OR REPLACE TEMP VIEW ks_report_icicle AS
SELECT CASE WHEN t.kind = 'more' THEN 'more-' || t.parent_id ELSE CAST(t.node_id AS VARCHAR) END AS id,
       coalesce(CAST(t.parent_id AS VARCHAR), '') AS parent,
       t.kind,
       CASE WHEN t.kind = 'more' THEN '… ' || t.folded || ' more' WHEN t.parent_id IS NULL THEN 'whole run'
            ELSE t.label END AS label,
       CASE WHEN t.kind = 'module' AND t.module = '' THEN 'the root module, and what ran outside any module'
            WHEN t.kind = 'module' THEN t.module
            WHEN t.kind = 'call' THEN coalesce(t.function_name, '(no call)') || ' in '
                                      || CASE WHEN t.module = '' THEN 'the root module' ELSE t.module END
            WHEN t.kind = 'kernel' THEN t.kernel
            ELSE t.folded || ' nodes under the threshold' END AS detail,
       CASE WHEN EXISTS (SELECT 1 FROM ks_report_tree c WHERE c.parent_id = t.node_id) THEN 0.0 ELSE t.time_us END
           AS value_us,
       t.time_us,
       t.share_pct,
       t.kernels
FROM ks_report_tree t
ORDER BY t.kind = 'more', t.node_id, t.parent_id;

-- The costliest calls (the bar chart).
CREATE OR REPLACE TEMP VIEW ks_report_top_calls AS
SELECT function_name, time_spent_us, time_spent_pct, calls FROM ${summary} LIMIT 20;

-- Without calls (a plain trace): the time by operator instead.
CREATE OR REPLACE TEMP VIEW ks_report_ops AS
SELECT op, count(*) AS kernels, sum(kernel_us) AS time_us,
       CASE WHEN sum(sum(kernel_us)) OVER () > 0 THEN 100.0 * sum(kernel_us) / sum(sum(kernel_us)) OVER () ELSE 0.0 END
           AS share_pct
FROM ${kernels}
GROUP BY op
ORDER BY time_us DESC, op NULLS LAST
LIMIT 20;

-- Per-signature cost of the 8 costliest functions whose samples were collected, at most 10 signatures each (the
-- costliest); `signatures` says how many the function has.
CREATE OR REPLACE TEMP VIEW ks_report_samples AS
WITH top AS (
    SELECT function_name, time_spent_us, row_number() OVER (ORDER BY time_spent_us DESC, function_name) AS position
    FROM ${summary} WHERE num_distinct_samples IS NOT NULL
    QUALIFY position <= 8
),
ranked AS (
    SELECT c.*, t.position, t.time_spent_us AS function_us,
           row_number() OVER (PARTITION BY c.function_name ORDER BY c.time_us DESC, c.rank, c.sample_id) AS place,
           count(*) OVER (PARTITION BY c.function_name) AS signatures
    FROM ${sample_costs} c JOIN top t USING (function_name)
)
SELECT position, function_name, function_us, signatures, place, rank, sample_id, signature, calls, time_us,
       us_per_call, function_pct
FROM ranked
WHERE place <= 10
ORDER BY position, place;

-- The costliest kernels, by name, with their kind and streams.
CREATE OR REPLACE TEMP VIEW ks_report_kernels AS
SELECT kernel_short(kernel) AS short_name, kernel, string_agg(DISTINCT kind, ', ' ORDER BY kind) AS kind,
       count(*) AS launches, sum(kernel_us) AS time_us, avg(kernel_us) AS mean_us,
       CASE WHEN sum(sum(kernel_us)) OVER () > 0 THEN 100.0 * sum(kernel_us) / sum(sum(kernel_us)) OVER () ELSE 0.0 END
           AS share_pct,
       string_agg(DISTINCT CAST(stream AS VARCHAR), ', ' ORDER BY CAST(stream AS VARCHAR)) AS streams
FROM ${kernels}
GROUP BY kernel
ORDER BY time_us DESC, kernel
LIMIT 30;

-- Device time by kind (kernel, memcpy, memset, cpu) and stream.
CREATE OR REPLACE TEMP VIEW ks_report_streams AS
SELECT kind, device, stream, count(*) AS rows, sum(kernel_us) AS time_us,
       CASE WHEN sum(sum(kernel_us)) OVER () > 0 THEN 100.0 * sum(kernel_us) / sum(sum(kernel_us)) OVER () ELSE 0.0 END
           AS share_pct
FROM ${kernels}
GROUP BY kind, device, stream
ORDER BY time_us DESC, kind, device, stream;
