-- thread_names.sql: the names a trace gave the threads that hold rows (profiling_df's thread_name): the tid_name of
-- each named key in $keys (kernels.thread below -2^62, a hash of the name: ingest.sql), one name per key.
SELECT tid, any_value(tid_name) AS name
FROM events
WHERE tid_name IS NOT NULL AND tid IN (SELECT unnest($keys))
GROUP BY tid
