"""A part of traceEvents inserted by DuckDB's JSON reader (ingest.sql), where the native reader leaves it."""

from __future__ import annotations

import os
import re

import duckdb

from .json_text import Leniencies, read_file_leniently
from .sql import run_sql_file

# DuckDB's reasons to refuse what readable_text reads
LENIENT_FAULT = re.compile("invalid UTF-8|control character|surrogate")
DEFAULT_OBJECT_BYTES = 16 << 20  # DuckDB's JSON reader's default maximum_object_size: a larger event is read again
MAX_OBJECT_BYTES = (1 << 32) - 1  # the most it takes (a UINTEGER)


def insert_by_duckdb(cursor, file: str, first_id: int, rank: int, leniencies: Leniencies) -> int:
    """Insert the part file ``file`` (ids from ``first_id``), how many events; read again where DuckDB refuses an event
    larger than its default object size (a name of many \\u escapes, which the native reader leaves to it), with the
    part's size, and where it refuses text that json_text reads leniently (counted in ``leniencies``), as read so."""
    ids = {"first_id": str(first_id), "rank": str(rank)}
    object_bytes, lenient = DEFAULT_OBJECT_BYTES, False
    while True:
        try:
            result = run_sql_file(cursor, "ingest.sql", events_file=file, object_bytes=str(object_bytes), **ids)
            return result.fetchone()[0]
        except duckdb.InvalidInputException as exc:
            if "maximum_object_size" in str(exc) and object_bytes == DEFAULT_OBJECT_BYTES:
                object_bytes = min(os.path.getsize(file) + 1, MAX_OBJECT_BYTES)
            elif not lenient and LENIENT_FAULT.search(str(exc)) and read_file_leniently(file, leniencies):
                lenient = True
            else:
                raise
