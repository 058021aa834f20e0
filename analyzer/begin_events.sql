-- begin_events.sql: whether the trace writes any span as a "B" (begin) event, which paired_spans.sql pairs with
-- its "E"; most traces write only complete ("X") events, and then that step is skipped.
SELECT EXISTS (SELECT 1 FROM events WHERE ph = 'B');
