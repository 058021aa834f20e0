-- scope_metrics.sql: Kineto's XPU scope profiler (PTI >= 0.15: hardware metrics per kernel) writes the record of a
-- kernel's metrics as one more "kernel", named "metrics: <kernel>", over the kernel on its stream from 1 ns before it to
-- 1 ns after it, with a kernel_id and neither correlation nor External id (XpuptiActivityHandlers.cpp,
-- handleScopeRecord), beside its counters (category xpu_scope_profiler). It is no device work: filed under the
-- counters' category, it makes no row, and no ac2g flow of its kernel (linked_by_flow.sql) lends it a correlation.
-- validate.py runs this first where rule 5 (a device event without a correlation) is the first fault found.
-- Returns the number of events filed.
UPDATE events SET cat = 'xpu_scope_profiler'
WHERE ph = 'X' AND cat = 'kernel' AND correlation IS NULL AND external_id IS NULL AND starts_with(name, 'metrics: ')
  AND json_exists(args, '$.kernel_id') AND json_extract(args, '$.correlation') IS NULL
