-- linked_by_external_id.sql: a trace whose device events and CUDA/ROCm runtime calls carry no correlation at all
-- links them by their "External id". ROCm builds of libkineto that trace through roctracer write the link between a
-- launch (hipExtModuleLaunchKernel…) and its kernel so: both carry the roctracer correlation id as "External id", as
-- do the ac2g flows between them, and no key "correlation"; their operators carry External ids of their own counter.
-- There each one's External id becomes its correlation. Where no launch carries an External id (a trace without its
-- runtime calls: an excerpt, or a filter that kept operators and device events), a device event's External id can
-- be nothing but Kineto's own, its operator's: it stays, and the device event gets a correlation of its own that no
-- launch has (-1 - event_id), so that it is a device event whose launch the trace lacks, attributed to that operator.
-- A device event or launch that carries neither key (a trace of kernels alone, as a converter from another profiler
-- writes one, or a runtime call that launched nothing) gets such a correlation of its own too: its row is kept, with
-- no launch or operator to name, where nothing else could link it. One whose correlation is written but no integer
-- keeps it, for validate.sql's rule 5 to name.
-- Only where not one device event or launch of any runtime (ks_launch_category: XPU's, a PrivateUse1 backend's too)
-- has a correlation: in a trace that writes correlations, an event without one is a fault (validate.sql's rule 5)
-- or linked by its ac2g flow (linked_by_flow.sql, next), and its External id, an operator's, would link it to the
-- wrong launch.
-- validate.py runs this where rule 5 is the first fault found. Returns the number of events relinked.
UPDATE events
SET correlation = CASE WHEN launches.have_ids AND external_id IS NOT NULL THEN external_id ELSE -1 - event_id END,
    external_id = CASE WHEN launches.have_ids THEN NULL ELSE external_id END
FROM (SELECT EXISTS (SELECT 1 FROM events WHERE ph = 'X' AND cat IN ('cuda_runtime', 'cuda_driver')
                                          AND external_id IS NOT NULL) AS have_ids) AS launches
WHERE ph = 'X' AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cuda_runtime', 'cuda_driver')
  AND correlation IS NULL
  AND (external_id IS NOT NULL AND (launches.have_ids OR cat IN ('kernel', 'gpu_memcpy', 'gpu_memset'))
       OR external_id IS NULL AND json_extract(args, '$.correlation') IS NULL)
  AND NOT EXISTS (SELECT 1 FROM events
                  WHERE (cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') OR ks_launch_category(cat))
                    AND correlation IS NOT NULL)
