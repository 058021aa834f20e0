"""Short kernel names for tables (kernel_names.sql: the ``kernel_short`` macro; short_names.sql: ties)."""

from __future__ import annotations

from collections.abc import Iterable

import duckdb
import pandas as pd

from .connection import new_connection
from .sql import run_sql_file, sql_text


def define_kernel_short(con: duckdb.DuckDBPyConnection) -> None:
    """The SQL macro ``kernel_short(kernel)`` on ``con`` (docs/sql.md)."""
    run_sql_file(con, "kernel_names.sql")


def short_kernel_names(kernels: Iterable[str | None]) -> dict[str, str]:
    """Full name -> the name one table shows: its short name, numbered ``[1]``, ``[2]``… where several kernels
    of the table share one (docs/analysis.md, "Kernel names")."""
    names = pd.DataFrame({"kernel": pd.Series(list(kernels), dtype=object)})  # noqa: F841 (read by name below)
    con = new_connection()
    try:
        define_kernel_short(con)
        return dict(con.execute(sql_text("short_names.sql")).fetchall())
    finally:
        con.close()
