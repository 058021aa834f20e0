-- launch_check.sql: did the profiler keep, for every launch, its device event, and for every device
-- event, its launch? Returns one row: launches, device_events, and the two counts of orphans. attribution.sql
-- counts them (table ks_launch_check) from the launches and rows it builds anyway; only kernel and graph
-- launches must have device events there.
SELECT launches, device_events, launches_without_device_event, device_events_without_launch FROM ks_launch_check
