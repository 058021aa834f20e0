-- device_time_calls.sql: device events whose runtime call a writer filed at the device event's own start, per rank
-- (Run.notes). torch_npu's Kineto export writes each task's privateuse1_runtime call with the task's name, 0 µs, at
-- the task's start on the device: the attribution holds the call by the operators running on its thread then, which
-- lag the one that dispatched it by the device's queue. A launch of Kineto's CUDA or ROCm traces is named for the API
-- (cudaLaunchKernel…) and precedes its device event, so it has none. Returns rank, such device events, device events.
WITH calls AS MATERIALIZED (  -- few or none (a scan of numbers first): without them no device event is read
    SELECT DISTINCT rank, name, ts_ns FROM events
    WHERE dur_ns = 0 AND ph = 'X' AND ks_launch_category(cat) AND ts_ns IS NOT NULL
),
device AS (
    SELECT rank, name, ts_ns FROM events
    WHERE ph = 'X' AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') AND rank IN (SELECT rank FROM calls)
)
SELECT rank, count(c.name) AS at_their_start, count(*) AS device_events
FROM device LEFT JOIN calls c USING (rank, name, ts_ns)
GROUP BY rank
HAVING count(c.name) > 0
ORDER BY rank
