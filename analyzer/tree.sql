-- tree.sql: the module tree (view `module_tree`, Run.tree(), `kernelscope tree`): one row per module of the
-- hierarchy and rank, parents before their children, children by time, most expensive first.
-- The modules are every dotted prefix of every row's module_name (`encoder.layer.0.attn` gives `encoder`,
-- `encoder.layer`, `encoder.layer.0` and itself), under the root module '', which also holds the rows outside
-- any module (module_name NULL): the root's inclusive time is the rank's Σ kernel_us.
-- The placeholder `kernels`: the rows to build it from (`kernels`, or the caller's relation with the same columns: all ranks
-- merged into rank NULL); substituted by tree.py from a fixed list, never from user input.
WITH
own AS (  -- per innermost module and functional call: the rows' time (a call only to count them below)
    SELECT rank, coalesce(module_name, '') AS module, function_name,
           sum(kernel_us) AS own_us, count(*) AS own_kernels
    FROM ${kernels}
    GROUP BY ALL
),
paths AS (
    SELECT *, CASE WHEN module = '' THEN [] ELSE string_split(module, '.') END AS path FROM own
),
ancestry AS (  -- every innermost module with each of its ancestors, the root (depth 0) and itself included
    SELECT rank, module AS descendant, function_name, own_us, own_kernels,
           array_to_string(path[1:depth], '.') AS module, depth, path
    FROM paths, unnest(range(0, len(path) + 1)) AS levels(depth)
),
nodes AS (
    SELECT rank, module, depth, any_value(path)[1:depth] AS node_path,
           sum(own_us)                                                    AS inclusive_us,
           coalesce(sum(own_us) FILTER (WHERE descendant = module), 0.0) AS own_us,
           sum(own_kernels)                                               AS kernels,
           count(DISTINCT function_name)                                  AS functions
    FROM ancestry
    GROUP BY rank, module, depth
),
ordered AS (  -- each node's place among its siblings, most expensive first
    SELECT *, CASE WHEN depth > 0 THEN array_to_string(node_path[1:depth - 1], '.') END AS parent,
           row_number() OVER (PARTITION BY rank, parent ORDER BY inclusive_us DESC, module) AS sibling
    FROM nodes
),
keys AS (  -- the places along the path from the root down to each node: sorting by it lists the tree depth first
    SELECT n.rank, n.module, list(o.sibling ORDER BY up.depth) AS tree_order
    FROM ordered n
    CROSS JOIN unnest(range(1, n.depth + 1)) AS up(depth)
    JOIN ordered o ON o.rank IS NOT DISTINCT FROM n.rank AND o.module = array_to_string(n.node_path[1:up.depth], '.')
    GROUP BY n.rank, n.module
)
SELECT o.rank, o.module, o.parent, CASE WHEN o.depth = 0 THEN '' ELSE o.node_path[o.depth] END AS name,
       CAST(o.depth AS INTEGER) AS depth, o.inclusive_us, o.own_us,
       CASE WHEN r.total_us > 0 THEN 100.0 * o.inclusive_us / r.total_us ELSE 0.0 END AS share_pct,
       CAST(o.kernels AS BIGINT) AS kernels, CAST(o.functions AS BIGINT) AS functions
FROM ordered o
JOIN (SELECT rank, inclusive_us AS total_us FROM nodes WHERE depth = 0) r ON r.rank IS NOT DISTINCT FROM o.rank
LEFT JOIN keys k ON k.rank IS NOT DISTINCT FROM o.rank AND k.module = o.module
ORDER BY o.rank, coalesce(k.tree_order, [])
