-- process_keys_end.sql: the trace's own correlations and External ids back in `events` and `kernels`, after the
-- attribution read those process_keys.sql made each process's own.
UPDATE events e SET correlation = k.correlation, external_id = k.external_id
FROM ks_process_keys k WHERE e.event_id = k.event_id;

UPDATE kernels r SET correlation = k.correlation FROM ks_process_keys k WHERE r.event_id = k.event_id;

DROP TABLE ks_launch_pids;
DROP TABLE ks_processes;
DROP TABLE ks_device_owners;
DROP TABLE ks_process_keys;
