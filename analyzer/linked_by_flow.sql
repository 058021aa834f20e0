-- linked_by_flow.sql: device events without a correlation, in a trace whose launches carry correlations, take the
-- correlation of the launch their ac2g flow arrow starts at. Some libkineto builds (ROCm's among them) write a device
-- event with its operator's "External id" alone, and its link to its launch only as a flow: a start ("ph": "s") on
-- the launch's thread at the launch, and a finish ("ph": "f", "bp": "e": bound to the slice that encloses it) with the
-- same "id" (events.flow_id) on the device event's (pid, tid) within the device event (from its start to before its
-- end, where the next one on its stream may start and have its own flow). Of nested launches that hold
-- the start (a runtime call around a driver call), the innermost. A device event that has a correlation that is no
-- integer ("x1") keeps it, for validate.sql's rule 5 to name. validate.py runs this where rule 5 (a device event
-- without a correlation) is the first fault found and linked_by_external_id.sql linked nothing.
-- Returns the number of events linked.
UPDATE events AS d SET correlation = link.correlation
FROM (
    SELECT d.event_id, arg_max(l.correlation, (l.ts_ns, -l.dur_ns)) AS correlation
    FROM events d
    JOIN events f ON f.ph = 'f' AND f.cat = 'ac2g' AND f.pid = d.pid AND f.tid = d.tid
                 AND f.ts_ns >= d.ts_ns AND (f.ts_ns < d.ts_ns + d.dur_ns OR f.ts_ns = d.ts_ns)
    JOIN events s ON s.ph = 's' AND s.cat = 'ac2g' AND s.flow_id = f.flow_id
    JOIN events l ON l.ph = 'X' AND ks_launch_category(l.cat) AND l.correlation IS NOT NULL
                 AND l.pid = s.pid AND l.tid = s.tid AND s.ts_ns BETWEEN l.ts_ns AND l.ts_ns + l.dur_ns
    WHERE d.ph = 'X' AND d.cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') AND d.correlation IS NULL
      AND json_extract(d.args, '$.correlation') IS NULL  -- none written: one that is no integer is the writer's fault
    GROUP BY d.event_id
) AS link
WHERE d.event_id = link.event_id
