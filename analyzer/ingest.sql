-- ingest.sql: append one part of the trace's traceEvents array (a file holding a JSON array of consecutive
-- events) to `events`. event_id is ${first_id} + the position in the part (event_ids.sql renumbers); rank ${rank}.
-- ${object_bytes}: the largest event read (DuckDB's default, or the part's size where an event is larger).
-- ts/dur are read as exact decimals and stored as integer nanoseconds, so containment tests are exact; 38
-- digits hold epoch microseconds (16 integer digits), whose nanoseconds fit BIGINT until 2262. Past it the cast
-- fails and validate.py names the event, where it is one validate.sql's rules hold (a device event, launch, operator
-- or annotation); on any other event the time is NULL: Kineto writes a profiler span ("Trace") whose end precedes
-- its start with an unsigned 64-bit wrap for its dur (18446744073709551.615 µs), and nothing reads it.
-- A pid/tid that is the text of an integer in the trace ("7", the 2021 format's "1441273664") is that integer, as
-- Chrome's trace viewer (threads keyed by JavaScript property: "7" and 7 are one) and Perfetto (CoerceToUint32) read
-- it; the 2021 format writes its CPU threads as text and its flows' starts on them as numbers. Any other string
-- ("Spans", "python", "stream 7", "07": Chrome takes any value) keeps its text in pid_name/tid_name, and its pid/tid
-- is a key made from the text's hash, from -2^63 + 1 to -2^62, where no trace's integers lie (n names share a key
-- with odds of about n^2 / 2^63), made as each row is written (two UPDATEs after the load cost 1.5-2 ms on every trace: every Kineto
-- trace names its "Spans" and "Traces" threads). A flow's id (ph s, t, f: the arrows between a launch and its device
-- events) is its integer, or NULL for other strings; the full args stay as JSON, and the join keys the attribution
-- needs come from one parse of them (json_transform: the same values as TRY_CAST(json_extract(args, path)) of each,
-- in one pass instead of one each; "external id" apart, as a struct's field names ignore case, and parsed only from
-- args whose text holds it).
-- The 2021 format (torch 1.8-1.9) is read as the later one: its categories by their later names, a memory event
-- without cat as cpu_instant_event, and "external id" (its launches' and device events') as external_id where
-- "External id" is missing or null. _kineto.c (LEGACY_CATEGORIES) does the same. So are the device events of
-- Kineto's forks for other devices: <device>_kernel (privateuse1_kernel), <device>_memcpy (mlu_memcpy,
-- privateuse1_memcpy) and <device>_memset as kernel, gpu_memcpy and gpu_memset, and memcpy and memset as the latter
-- two (_kineto.c, device_category); and MTIA's on-device events, mtia_ccp_events, as kernel: Kineto's ActivityType.h
-- now makes MTIA_CCP_EVENTS an alias of CONCURRENT_KERNEL, which it writes as "kernel". Their launches keep their names (scope_names.sql, ks_launch_category).
-- An instant (ph "i" or "I") of a category held to those rules is a complete event of no duration (ph "X", dur 0):
-- Perfetto's JSON export writes every slice of 0 ns on a thread so (export_json.cc: "I", scope "t", no dur), a
-- kernel, launch or operator of a trace it read included; _kineto.c (complete_instants) does the same.
-- An event whose args hold one key, "args", an object, has that object for its args: Perfetto's JSON export of a JSON
-- trace it read writes each event's args so (its importer keeps them under "args.", export_json.cc nests by the dots).
-- A device event without a stream arg (an integer's) has its tid for stream, where the trace wrote the tid as a JSON
-- integer within INTEGER: Kineto writes a device event's queue as its tid (pid the device, tid the resource), and the
-- stream arg only where the device's plugin adds it, which Intel's XPU plugin (its SYCL queue the tid alone) and
-- ROCm's roctracer build do not. _kineto.c's has_repeats keys device events the same way.
INSERT INTO events
SELECT event_id, CASE WHEN instant THEN 'X' ELSE ph END AS ph, cat, name,
       CASE WHEN pid_name IS NULL THEN pid
            ELSE -4611686018427387904 - CAST(hash(pid_name) % 4611686018427387904 AS BIGINT) END AS pid,
       CASE WHEN tid_name IS NULL THEN tid
            ELSE -4611686018427387904 - CAST(hash(tid_name) % 4611686018427387904 AS BIGINT) END AS tid,
       CASE WHEN held_to_rules THEN CAST(ts * 1000 AS BIGINT) ELSE TRY_CAST(ts * 1000 AS BIGINT) END AS ts_ns,
       CASE WHEN instant THEN 0 WHEN held_to_rules THEN CAST(dur * 1000 AS BIGINT) ELSE TRY_CAST(dur * 1000 AS BIGINT) END
           AS dur_ns,
       correlation, external_id, device,
       coalesce(stream, CASE WHEN cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') THEN tid_queue END) AS stream,
       args, flow_id, pid_name, tid_name, CAST(${rank} AS INTEGER) AS rank
FROM (SELECT *, held_to_rules AND ph IN ('i', 'I') AS instant
FROM (SELECT *, cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cpu_op', 'user_annotation', 'runtime', 'driver')
                 OR suffix(cat, '_runtime') OR suffix(cat, '_driver') AS held_to_rules
FROM (SELECT
    CAST(${first_id} AS BIGINT) + (row_number() OVER ()) - 1                                AS event_id,
    ph,
    CASE cat WHEN 'Kernel' THEN 'kernel' WHEN 'Memcpy' THEN 'gpu_memcpy' WHEN 'Memset' THEN 'gpu_memset'
             WHEN 'Runtime' THEN 'cuda_runtime' WHEN 'Operator' THEN 'cpu_op' WHEN 'User' THEN 'gpu_user_annotation'
             WHEN 'memcpy' THEN 'gpu_memcpy' WHEN 'memset' THEN 'gpu_memset' WHEN 'mtia_ccp_events' THEN 'kernel'
             ELSE CASE WHEN suffix(cat, '_kernel') THEN 'kernel' WHEN suffix(cat, '_memcpy') THEN 'gpu_memcpy'
                       WHEN suffix(cat, '_memset') THEN 'gpu_memset'
                       ELSE coalesce(cat, CASE WHEN ph = 'i' AND name = '[memory]' THEN 'cpu_instant_event' END) END
    END                                                                                     AS cat,
    name,
    CASE WHEN json_type(pid) <> 'VARCHAR' THEN TRY_CAST(pid AS BIGINT) WHEN pid_number THEN CAST(pid ->> '$' AS BIGINT)
    END                                                                                     AS pid,
    CASE WHEN json_type(tid) <> 'VARCHAR' THEN TRY_CAST(tid AS BIGINT) WHEN tid_number THEN CAST(tid ->> '$' AS BIGINT)
    END                                                                                     AS tid,
    CASE WHEN json_type(pid) = 'VARCHAR' AND NOT pid_number THEN pid ->> '$' END            AS pid_name,
    CASE WHEN json_type(tid) = 'VARCHAR' AND NOT tid_number THEN tid ->> '$' END            AS tid_name,
    CASE WHEN json_type(tid) <> 'VARCHAR' THEN TRY_CAST(tid AS INTEGER) END                 AS tid_queue,
    ts,
    dur,
    keys.correlation                                                                        AS correlation,
    coalesce(keys."External id",
             CASE WHEN contains(args, '"external id"') THEN TRY_CAST(json_extract(args, '$."external id"') AS BIGINT) END)
                                                                                            AS external_id,
    keys.device                                                                             AS device,
    keys.stream                                                                             AS stream,
    args,
    CASE WHEN ph IN ('s', 't', 'f') THEN TRY_CAST(id AS BIGINT) END                         AS flow_id
FROM (
    SELECT *, json_transform(args, '{"correlation": "BIGINT", "External id": "BIGINT", "device": "INTEGER", "stream": "INTEGER"}') AS keys,
           coalesce(CAST(TRY_CAST(pid ->> '$' AS BIGINT) AS VARCHAR) = pid ->> '$', false) AS pid_number,
           coalesce(CAST(TRY_CAST(tid ->> '$' AS BIGINT) AS VARCHAR) = tid ->> '$', false) AS tid_number
    FROM (
        SELECT * REPLACE (CASE WHEN contains(args, '"args"') AND json_keys(args) = ['args']
                                    AND json_type(args, '$.args') = 'OBJECT' THEN args -> '$.args' ELSE args END
                          AS args)
        FROM read_json(
            ${events_file},
            format = 'array',
            columns = {ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', pid: 'JSON', tid: 'JSON',
                       ts: 'DECIMAL(38,3)', dur: 'DECIMAL(38,3)', args: 'JSON', id: 'JSON'},
            maximum_object_size = ${object_bytes}
        )
    )
))));
