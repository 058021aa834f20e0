-- span_keys.sql: macros every run's connection has (connection.py); they read the run's variables when used.
-- A span's place in attribution.sql's nesting order (ks_innermost: latest start, then shortest, then, of equal spans, a
-- Python frame outside an operator, then last in the trace) is its order: a struct {s, e, r, id} that compares in
-- that order, id its event id. Where the trace's spans fit (variable ks_key_bits.packed), s is its key (ks_span_key)
-- and e, r are 0; else s is its start past the first, e its end negated, r 0 for a frame and 1 for any other span.
-- Either way the struct sorts as the spans nest; it is never read but for comparisons and its id.
--   ks_span_key(ts_ns, end_ns, frame, event_id): the 128-bit key, by the bits of variable ks_key_bits (start past the
--     first, duration, one bit that is 0 for a frame, event id);
--   ks_span_order_of_key(k): the order of the span whose key is k;
--   ks_span_order(ts_ns, end_ns, frame, event_id): the order of a span.
CREATE OR REPLACE MACRO ks_span_key(ts_ns, end_ns, frame, event_id) AS
    (CAST(ts_ns - getvariable('ks_key_bits').t0 AS UHUGEINT)
         << CAST(getvariable('ks_key_bits').d + getvariable('ks_key_bits').i + 1 AS UTINYINT))
    | ((((CAST(1 AS UHUGEINT) << getvariable('ks_key_bits').d) - 1) - CAST(end_ns - ts_ns AS UHUGEINT))
         << CAST(getvariable('ks_key_bits').i + 1 AS UTINYINT))
    | (CAST(NOT frame AS UHUGEINT) << getvariable('ks_key_bits').i)
    | CAST(event_id AS UHUGEINT);

CREATE OR REPLACE MACRO ks_span_order_of_key(k) AS CASE WHEN k IS NOT NULL THEN {
    s: k, e: CAST(0 AS BIGINT), r: CAST(0 AS UTINYINT),
    id: CAST(k & ((CAST(1 AS UHUGEINT) << getvariable('ks_key_bits').i) - 1) AS BIGINT)} END;

CREATE OR REPLACE MACRO ks_span_order(ts_ns, end_ns, frame, event_id) AS CASE WHEN getvariable('ks_key_bits').packed
    THEN {s: ks_span_key(ts_ns, end_ns, frame, event_id), e: CAST(0 AS BIGINT), r: CAST(0 AS UTINYINT), id: event_id}
    ELSE {s: CAST(ts_ns - getvariable('ks_key_bits').t0 AS UHUGEINT), e: -end_ns, r: CAST(NOT frame AS UTINYINT),
          id: event_id} END;
