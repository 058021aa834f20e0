-- shared_correlations.sql: whether launches of one runtime (ks_launch_family) in several processes share a
-- correlation: several ranks' traces pasted into one file, each process numbering its own calls (process_keys.sql
-- then tells them apart).
SELECT EXISTS (SELECT 1 FROM (SELECT DISTINCT ks_launch_family(cat) AS family, correlation, pid FROM events
                              WHERE ph = 'X' AND ks_launch_category(cat) AND correlation IS NOT NULL)
               GROUP BY family, correlation HAVING count(*) > 1)
