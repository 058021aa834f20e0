-- linked_by_external_id.sql: a trace whose device events and CUDA/ROCm runtime calls carry no correlation at all
-- takes each one's "External id" as its correlation, and that id names no operator. ROCm builds of libkineto that
-- trace through roctracer write the link between a launch (hipExtModuleLaunchKernel…) and its kernel so: both carry
-- the roctracer correlation id as "External id", as do the ac2g flows between them, and no key "correlation";
-- their operators carry External ids of their own counter. Only where not one such event has a correlation: in a
-- trace that writes correlations, an event without one is a fault (validate.sql's rule 5), and its External id,
-- an operator's, would link it to the wrong launch. validate.py runs this where rule 5 is the first fault found.
-- Returns the number of events relinked.
UPDATE events SET correlation = external_id, external_id = NULL
WHERE ph = 'X' AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cuda_runtime', 'cuda_driver')
  AND correlation IS NULL AND external_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM events
                  WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cuda_runtime', 'cuda_driver')
                    AND correlation IS NOT NULL)
