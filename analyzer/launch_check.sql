-- launch_check.sql: did the profiler keep, for every launch, its device event, and for every device
-- event, its launch? Returns one row: launches, device_events, and the two counts of orphans.
-- Only kernel and graph launches must have device events: a cudaMemsetAsync/cudaMemcpyAsync of zero
-- bytes legitimately has none (seen on the H200: cuBLAS's memsets inside aten::addmm).
-- Macro ks_graph_launch of scope_names.sql.
WITH
launches AS (
    SELECT DISTINCT correlation FROM events
    WHERE ph = 'X' AND cat IN ('cuda_runtime', 'cuda_driver') AND correlation IS NOT NULL
      AND (regexp_matches(name, '^cu(da)?(LaunchKernel|LaunchCooperativeKernel)') OR ks_graph_launch(name))
),
runtime AS (
    SELECT DISTINCT correlation FROM events
    WHERE ph = 'X' AND cat IN ('cuda_runtime', 'cuda_driver') AND correlation IS NOT NULL
),
device_events AS (
    SELECT correlation FROM events WHERE ph = 'X' AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')
)
SELECT
    (SELECT count(*) FROM launches),
    (SELECT count(*) FROM device_events),
    (SELECT count(*) FROM launches l ANTI JOIN device_events d USING (correlation)),
    (SELECT count(*) FROM device_events d ANTI JOIN runtime r USING (correlation))
