-- span_keys.sql: macros every run's connection has (connection.py); they read the run's variables when used.
-- ks_span_key(ts_ns, end_ns, event_id): a span's place in attribution.sql's nesting order (ks_innermost) as one
-- 128-bit integer, by the bits of variable ks_key_bits (start past the first, duration, event id);
-- ks_span_of_key(k): the span {s: start, e: -end, id: event id} back from it.
CREATE OR REPLACE MACRO ks_span_key(ts_ns, end_ns, event_id) AS
    (CAST(ts_ns - getvariable('ks_key_bits').t0 AS UHUGEINT)
         << CAST(getvariable('ks_key_bits').d + getvariable('ks_key_bits').i AS UTINYINT))
    | ((((CAST(1 AS UHUGEINT) << getvariable('ks_key_bits').d) - 1) - CAST(end_ns - ts_ns AS UHUGEINT))
         << getvariable('ks_key_bits').i)
    | CAST(event_id AS UHUGEINT);

CREATE OR REPLACE MACRO ks_span_of_key(k) AS CASE WHEN k IS NOT NULL THEN {
    s: getvariable('ks_key_bits').t0
       + CAST(k >> CAST(getvariable('ks_key_bits').d + getvariable('ks_key_bits').i AS UTINYINT) AS BIGINT),
    e: -(getvariable('ks_key_bits').t0
         + CAST(k >> CAST(getvariable('ks_key_bits').d + getvariable('ks_key_bits').i AS UTINYINT) AS BIGINT)
         + CAST((((CAST(1 AS UHUGEINT) << getvariable('ks_key_bits').d) - 1)
                 - ((k >> getvariable('ks_key_bits').i) & ((CAST(1 AS UHUGEINT) << getvariable('ks_key_bits').d) - 1)))
                AS BIGINT)),
    id: CAST(k & ((CAST(1 AS UHUGEINT) << getvariable('ks_key_bits').i) - 1) AS BIGINT)} END;
