-- tree_shown.sql: what `kernelscope tree` prints of tree_nodes.sql: the root; below it every node of at least
-- `min_pct` percent of the time, down to `max_depth` levels (NULL: all), calls and kernels only with `show_calls`;
-- and per shown node, one 'more' row for its children under min_pct (how many, their time), listed after the
-- shown nodes. The kept nodes form a tree: a node is shown only below a shown parent.
-- Placeholders: `nodes`, tree_nodes.sql's query; `min_pct` (a number), `max_depth` (an integer or NULL),
-- `show_calls` (true or false), substituted by tree.py.
WITH RECURSIVE
nodes AS (${nodes}),
candidates AS (  -- the nodes the options let through, whatever their parent
    SELECT * FROM nodes
    WHERE (${show_calls} OR kind = 'module') AND tree_depth <= coalesce(${max_depth}, tree_depth)
),
shown AS (
    SELECT * FROM candidates WHERE parent_id IS NULL
    UNION ALL
    SELECT c.* FROM candidates c JOIN shown s ON c.parent_id = s.node_id WHERE c.share_pct >= ${min_pct}
),
folded AS (
    SELECT c.parent_id, count(*) AS nodes, sum(c.time_us) AS time_us, sum(c.share_pct) AS share_pct
    FROM candidates c JOIN shown s ON c.parent_id = s.node_id
    WHERE c.share_pct < ${min_pct}
    GROUP BY c.parent_id
)
SELECT node_id, parent_id, kind, module, function_name, kernel, label, time_us, own_us, share_pct, kernels,
       tree_depth, CAST(NULL AS BIGINT) AS folded
FROM shown
UNION ALL
SELECT NULL, parent_id, 'more', NULL, NULL, NULL, NULL, time_us, NULL, share_pct, NULL, NULL, nodes
FROM folded
ORDER BY kind = 'more', node_id, parent_id
