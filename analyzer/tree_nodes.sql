-- tree_nodes.sql: the module tree with its leaves, as one list of nodes for `kernelscope tree` and the report's
-- icicle: modules (tree.sql), under each the calls whose innermost module it is, under each call its kernels
-- (module_calls.sql). node_id numbers the nodes depth first, children most expensive first (submodules and calls
-- alike); parent_id is the parent's node_id (NULL for the root). time_us: a module's inclusive time, a call's or a
-- kernel's own. tree_depth counts every level (a call is one below its module, a kernel two).
-- Placeholders: `tree`, tree.sql's query; `module_calls`, module_calls.sql's; both over the same rows (one tree).
WITH RECURSIVE
modules AS (${tree}),
leaves AS (${module_calls}),
nodes AS (
    SELECT rank, 'module' AS kind, module, CAST(NULL AS VARCHAR) AS function_name, CAST(NULL AS VARCHAR) AS kernel,
           name AS label, inclusive_us AS time_us, own_us, share_pct, kernels, depth AS tree_depth,
           {m: module, f: CAST(NULL AS VARCHAR), k: CAST(NULL AS VARCHAR), level: 0} AS key,
           CASE WHEN parent IS NOT NULL THEN {m: parent, f: CAST(NULL AS VARCHAR), k: CAST(NULL AS VARCHAR), level: 0} END
               AS parent_key
    FROM modules
    UNION ALL
    SELECT l.rank, CASE WHEN l.kernel IS NULL THEN 'call' ELSE 'kernel' END, l.module, l.function_name, l.kernel,
           CASE WHEN l.kernel IS NOT NULL THEN kernel_short(l.kernel) ELSE coalesce(l.function_name, '(no call)') END,
           l.time_us, NULL, l.share_pct, l.kernels,
           m.depth + CASE WHEN l.kernel IS NULL THEN 1 ELSE 2 END,
           {m: l.module, f: l.function_name, k: l.kernel, level: CASE WHEN l.kernel IS NULL THEN 1 ELSE 2 END},
           CASE WHEN l.kernel IS NULL THEN {m: l.module, f: CAST(NULL AS VARCHAR), k: CAST(NULL AS VARCHAR), level: 0}
                ELSE {m: l.module, f: l.function_name, k: CAST(NULL AS VARCHAR), level: 1} END
    FROM leaves l
    JOIN modules m ON m.rank IS NOT DISTINCT FROM l.rank AND m.module = l.module
),
numbered AS (  -- each node's place among its siblings: most expensive first, a module before a call of equal time
    SELECT *, row_number() OVER (PARTITION BY rank, parent_key
                                 ORDER BY time_us DESC, key.level, label, key.f, key.k) AS sibling
    FROM nodes
),
walk AS (  -- the places along the path from the root: sorting by it lists the tree depth first
    SELECT rank, key, CAST([] AS BIGINT[]) AS path FROM numbered WHERE parent_key IS NULL
    UNION ALL
    SELECT n.rank, n.key, list_append(w.path, n.sibling)
    FROM walk w
    JOIN numbered n ON n.rank IS NOT DISTINCT FROM w.rank AND n.parent_key = w.key
),
placed AS (
    SELECT n.*, row_number() OVER (ORDER BY n.rank, w.path) AS node_id
    FROM numbered n
    JOIN walk w ON w.rank IS NOT DISTINCT FROM n.rank AND w.key = n.key
)
SELECT c.rank, c.node_id, p.node_id AS parent_id, c.kind, c.module, c.function_name, c.kernel, c.label,
       c.time_us, c.own_us, c.share_pct, c.kernels, c.tree_depth
FROM placed c
LEFT JOIN placed p ON p.rank IS NOT DISTINCT FROM c.rank AND p.key = c.parent_key
ORDER BY c.node_id
