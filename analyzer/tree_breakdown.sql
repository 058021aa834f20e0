-- tree_breakdown.sql: device time per module with its submodules (`analyze --by module_name --inclusive`), most
-- expensive first, in the columns of breakdown.sql, and own_us (rows whose innermost module it is). The shares are
-- of the whole run, so they add up to more than 100 along a branch. Placeholders: `tree`, tree.sql's query;
-- `top_k`, the rows to keep (0: all).
SELECT module AS module_name, kernels, inclusive_us AS time_spent_us, share_pct AS time_spent_pct, own_us
FROM (${tree})
ORDER BY inclusive_us DESC, depth, module
LIMIT CASE WHEN ${top_k} > 0 THEN ${top_k} END
