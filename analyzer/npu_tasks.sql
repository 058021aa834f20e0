-- npu_tasks.sql: the device events of a trace that Ascend's PyTorch profiler (torch_npu) or msprof wrote
-- (trace_view.json), which carry no category: the tasks of the process it names "Ascend Hardware" (one thread per
-- stream), each with its "Task Type" (AI_CORE, AI_VECTOR_CORE, MIX_AIC, MEMCPY_ASYNC…). A task that copies memory
-- becomes a gpu_memcpy, one that records or waits for an event or notify (EVENT_WAIT, NOTIFY_RECORD…: a stream's
-- synchronisation, as CUDA's cuda_sync events, which take no device time of their own) stays as it is, and every
-- other task becomes a kernel, on the stream its "Stream Id" names (else its thread's) and the device its "Device
-- Id" names. Its link to the operator that dispatched it is a flow ("async_npu", from the operator to the task),
-- which attribution.sql reads as its launch point. Slices of the process without a "Task Type" (a Step Trace
-- thread's iterations) are no device work and stay as they are.
-- rank_parts.py runs this after ingest, before validation, on a trace without libkineto's schemaVersion (libkineto
-- gives every device event a category; the statement cost a small trace 1.5-3 ms). Returns the number of events that
-- became device events.
UPDATE events
SET cat = CASE WHEN contains(args ->> '$."Task Type"', 'MEMCPY') THEN 'gpu_memcpy' ELSE 'kernel' END,
    stream = coalesce(TRY_CAST(args ->> '$."Stream Id"' AS INTEGER), TRY_CAST(tid AS INTEGER)),
    device = TRY_CAST(args ->> '$."Device Id"' AS INTEGER)
WHERE ph = 'X' AND cat IS NULL AND contains(args, 'Task Type')
  AND NOT regexp_matches(args ->> '$."Task Type"', 'WAIT|RECORD')
  AND pid IN (SELECT pid FROM events
              WHERE ph = 'M' AND name = 'process_name' AND args ->> '$.name' = 'Ascend Hardware')
