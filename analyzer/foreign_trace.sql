-- foreign_trace.sql: what wrote a trace that holds nothing to attribute (attributable.sql), where its events show
-- another profiler: a process that TensorFlow's and JAX's profilers name for a device or host ('/device:GPU:0',
-- '/host:CPU', '/job:localhost/…'), or a category of a Chrome browser trace (devtools.timeline, blink, v8…).
-- Returns: tf_process (the first such process name, or NULL), browser_category (the first such category, or NULL).
SELECT (SELECT min(args->>'$.name') FROM events
        WHERE ph = 'M' AND name = 'process_name' AND regexp_matches(args->>'$.name', '^/(host|device|job):')) AS tf_process,
       (SELECT min(cat) FROM events
        WHERE regexp_matches(cat, '^(disabled-by-default-)?(devtools|blink|v8|cc|gpu|viz|loading|netlog|toplevel)([.,]|$)'))
           AS browser_category
