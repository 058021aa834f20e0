-- event_ids.sql: parts were loaded in parallel with provisional ids, part << ${part_id_bits} + the position
-- in the part; add each part's shift (the events of the parts before it, minus its provisional base) so
-- event_id is the position in the whole traceEvents array.
UPDATE events
SET event_id = event_id + list_extract(CAST(${shifts} AS BIGINT[]), (event_id >> CAST(${part_id_bits} AS INTEGER)) + 1)
WHERE event_id >= (CAST(1 AS BIGINT) << CAST(${part_id_bits} AS INTEGER));
