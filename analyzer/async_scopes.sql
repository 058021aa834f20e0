-- async_scopes.sql: the operators and annotations a trace wrote as async slices ("ph": "b", ended by an "e" of their
-- id), per rank and category (Run.notes). The format puts an async slice on a track of its id, not on a thread's
-- stack, so it holds no launch of its thread and the attribution does not read it as a scope: the note says so, where
-- the rows would otherwise miss its scope without a word. Returns rank, cat, slices; per rank, most slices first.
SELECT rank, cat, count(*) AS slices
FROM events
WHERE ph = 'b' AND cat IN ('cpu_op', 'user_annotation')
GROUP BY rank, cat
ORDER BY rank, slices DESC, cat
