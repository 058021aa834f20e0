-- attributable.sql: whether a validated trace holds anything attribution.sql may make a row of, a device event or a
-- CPU operator; a trace with neither is refused before the attribution runs (run.py), so that refusing it costs no more
-- than reading it. (One whose operators are all kernelscope scopes is refused after the attribution.)
SELECT EXISTS (SELECT 1 FROM events WHERE ph = 'X' AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'cpu_op'))
