-- short_names.sql: the name one table shows for each distinct kernel of `names` (column kernel): kernel_short()
-- of kernel_names.sql; kernels of the table whose short names coincide get ' [1]', ' [2]'... in the order
-- of their full names, so no two rows of a table look alike.
SELECT kernel,
       CASE WHEN count(*) OVER (PARTITION BY short) > 1
            THEN short || ' [' || row_number() OVER (PARTITION BY short ORDER BY kernel) || ']'
            ELSE short END AS shown
FROM (SELECT DISTINCT kernel, kernel_short(kernel) AS short FROM names WHERE kernel IS NOT NULL)
