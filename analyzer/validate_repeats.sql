-- validate_repeats.sql: whether validate.sql's repeats (rules 8, 9) can find anything: a launch that shares its
-- correlation with another launch of its runtime (ks_launch_family), or device events with the same correlation, device, stream and start. Cheaper
-- than validate.sql's query, which names the first such event; validate.py runs that one only where this says
-- there may be one, or where the rows were not checked for rules 1-7 by the native reader. Its groups hold
-- validate.sql's (whose launches group by process too), so it never says no where validate.sql would find an event. A trace the native reader read
-- has this answer from the reader (_kineto.c: has_repeats within each part, repeated_across between parts;
-- tests/test_native_reader.py and tests/test_repeats_across_parts.py compare them) unless two parts share a key's hash,
-- and validate.py runs it only for the others.
SELECT (SELECT count(*) - count(DISTINCT (ks_launch_family(cat), correlation)) FROM events
        WHERE ph = 'X' AND ks_launch_category(cat) AND correlation IS NOT NULL) > 0
    OR EXISTS (SELECT 1 FROM events
               WHERE ph = 'X' AND cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') AND correlation IS NOT NULL
               GROUP BY correlation, device, stream, ts_ns HAVING count(*) > 1)
