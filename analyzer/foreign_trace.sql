-- foreign_trace.sql: what wrote a trace that holds nothing to attribute (attributable.sql), where its events show
-- another profiler: a process that TensorFlow's and JAX's profilers name for a device or host ('/device:GPU:0',
-- '/host:CPU', '/job:localhost/…'), a category of a Chrome browser trace (devtools.timeline, blink, v8…), or the
-- category "cuda" that nvprof2json and nsys2json give every CUDA call, copy and kernel of an nvprof or Nsight Systems
-- report they convert (Kineto has no such category), on processes they name for the device ("Device 0", "[0:1]
-- Overview", where nvprof2json lists each kernel twice) or the process.
-- Or a trace none of whose events (metadata aside) has a category, which every event torch.profiler writes has: a
-- tracer's of API calls (an eBPF probe's of CUDA driver calls, cuMemAlloc_v2, cuLaunchKernel…).
-- Returns: tf_process (the first such process name, or NULL), browser_category (the first such category, or NULL),
-- converted_process (the first process of a "cuda" event, or NULL), uncategorized (how many events there are where
-- none has a category, else NULL) and the first one's name.
SELECT (SELECT min(args->>'$.name') FROM events
        WHERE ph = 'M' AND name = 'process_name' AND regexp_matches(args->>'$.name', '^/(host|device|job):')) AS tf_process,
       (SELECT min(cat) FROM events
        WHERE regexp_matches(cat, '^(disabled-by-default-)?(devtools|blink|v8|cc|gpu|viz|loading|netlog|toplevel)([.,]|$)'))
           AS browser_category,
       (SELECT min(coalesce(pid_name, CAST(pid AS VARCHAR))) FROM events WHERE cat = 'cuda') AS converted_process,
       (SELECT CASE WHEN count(*) > 0 AND count(cat) = 0 THEN count(*) END FROM events WHERE ph IS DISTINCT FROM 'M')
           AS uncategorized,
       (SELECT arg_min(name, event_id) FROM events WHERE ph IS DISTINCT FROM 'M') AS first_name
