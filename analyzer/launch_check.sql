-- launch_check.sql: did the profiler keep, for every launch, its device event, and for every device
-- event, its launch? Returns one row: launches, device_events, and the two counts of orphans.
-- Only kernel and graph launches must have device events: a cudaMemsetAsync/cudaMemcpyAsync of zero
-- bytes legitimately has none (seen on the H200: cuBLAS's memsets inside aten::addmm).
-- Macros ks_kernel_launch and ks_graph_launch of scope_names.sql.
WITH
runtime AS MATERIALIZED (
    SELECT correlation,
           bool_or(ks_kernel_launch(name) OR ks_graph_launch(name))
               AS must_launch
    FROM events
    WHERE ph = 'X' AND cat IN ('cuda_runtime', 'cuda_driver') AND correlation IS NOT NULL
    GROUP BY correlation
),
device_events AS MATERIALIZED (
    SELECT correlation FROM events WHERE ph = 'X' AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')
)
SELECT
    (SELECT count(*) FROM runtime WHERE must_launch),
    (SELECT count(*) FROM device_events),
    (SELECT count(*) FROM runtime r ANTI JOIN device_events d USING (correlation) WHERE r.must_launch),
    (SELECT count(*) FROM device_events d ANTI JOIN runtime r USING (correlation))
