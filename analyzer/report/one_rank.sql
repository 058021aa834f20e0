-- one_rank.sql: the rows of one rank of a job as temporary views named like the run's own, for the views that
-- show one rank (the report's `--rank`): ks_rank_kernels, ks_rank_sample_totals (that rank's signatures, not
-- merged with the other ranks' as `sample_totals` is), ks_rank_sample_costs. The variable `ks_rank` names the rank;
-- ks_rank_summary (summary.sql over the first two) is defined by views.py.
CREATE OR REPLACE TEMP VIEW ks_rank_kernels AS
SELECT * FROM kernels WHERE rank = getvariable('ks_rank');

CREATE OR REPLACE TEMP VIEW ks_rank_sample_totals AS
SELECT function_name, CAST(sum(calls) AS BIGINT) AS calls, count(*) AS num_distinct_samples,
       CAST(sum(tensor_bytes) AS BIGINT) AS tensor_bytes
FROM samples
WHERE rank = getvariable('ks_rank')
GROUP BY function_name;

CREATE OR REPLACE TEMP VIEW ks_rank_sample_costs AS
SELECT * FROM sample_costs WHERE rank = getvariable('ks_rank');
