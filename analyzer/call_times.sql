-- call_times.sql: per input sample of one call (${function}), the device time its calls took in the recorded
-- pass, the kernels of the calls made inside it included: what replaying the call runs (kernelscope bench).
-- `kernels` gives a kernel to its innermost call only (F.linear's kernels inside F.multi_head_attention_forward
-- are linear's there); here a kernel counts for every scope of ${function} that holds its launch on the
-- launching thread, once per sample. Reads `events`, `kernels`, `samples` (all ranks) and the variables of
-- scope_names.sql. Columns: rank, sample_id, calls, recorded_us (all its calls together), pass_us (the rank's
-- device time).
WITH
calls AS (
    SELECT rank, pid, tid, ts_ns, ts_ns + dur_ns AS end_ns,
           ks_scope_call(name)[length(${function}) + length(getvariable('sample_separator')) + 1:] AS sample_text
    FROM events
    WHERE ph = 'X' AND ts_ns IS NOT NULL AND dur_ns > 0 AND cat IN ('cpu_op', 'user_annotation')
      AND starts_with(name, getvariable('function_prefix'))
      AND starts_with(ks_scope_call(name), ${function} || getvariable('sample_separator'))
),
numbered AS (
    SELECT rank, pid, tid, ts_ns, end_ns, CAST(sample_text AS BIGINT) AS sample_id
    FROM calls
    WHERE regexp_full_match(sample_text, '[0-9]+')
),
-- A kernel is held by a scope of ${function} that holds its launch: then the scope holds, on the same thread, the
-- call `kernels` gives the kernel to (call_event_id, the innermost call around the launch), so the launch is found
-- once, by attribution.sql's rules (a correlation names a launch of each runtime: ks_launch_family; a launch CUPTI
-- filed under another thread; a device event without a launch, held as its operator).
held AS (
    SELECT DISTINCT c.rank, c.sample_id, k.event_id, k.kernel_us
    FROM kernels k
    JOIN events e ON e.rank = k.rank AND e.event_id = k.call_event_id
    JOIN numbered c ON c.rank = e.rank AND c.pid = e.pid AND c.tid = e.tid
                   AND c.ts_ns <= e.ts_ns AND e.ts_ns + e.dur_ns <= c.end_ns
),
per_sample AS (
    SELECT rank, sample_id, sum(kernel_us) AS recorded_us FROM held GROUP BY rank, sample_id
),
passes AS (
    SELECT rank, sum(kernel_us) AS pass_us FROM kernels GROUP BY rank
)
SELECT s.rank, s.sample_id, s.calls, CAST(coalesce(t.recorded_us, 0) AS DOUBLE) AS recorded_us,
       CAST(coalesce(p.pass_us, 0) AS DOUBLE) AS pass_us
FROM samples s
LEFT JOIN per_sample t USING (rank, sample_id)
LEFT JOIN passes p USING (rank)
WHERE s.function_name = ${function}
ORDER BY s.rank, s.sample_id;
