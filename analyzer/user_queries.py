"""A user's SQL (``Run.sql``, ``Archive.sql``, ``kernelscope sql``) run on a connection: its result, and the note a
missing table's error gets."""

from __future__ import annotations

import duckdb

NO_TABLE = "Catalog Error: Table with name "


def query_frame(con: duckdb.DuckDBPyConnection, query: str, tables: list[str] | None = None):
    """A user's ``query`` (of ``Run.sql``, ``Archive.sql``, ``kernelscope sql``) as a DataFrame; a missing table's
    error gets a note naming ``tables`` (default: ``con``'s), where DuckDB may guess one of its catalog's, pg_enum."""
    try:
        result = query_result(con, query)
    except duckdb.CatalogException as exc:
        if str(exc).startswith(NO_TABLE):
            exc.add_note(f"The tables: {', '.join(tables or table_names(con))}.")
        raise
    return result.df()


def query_result(con: duckdb.DuckDBPyConnection, query: str):
    """A user's ``query`` run, its result not yet fetched; text of no statement (blank, comments or semicolons only),
    which DuckDB answers with no result at all, is a KernelscopeError."""
    from .errors import KernelscopeError

    result = con.execute(query)
    if result is None:
        raise KernelscopeError(None, "the query holds no SQL statement")
    return result


def table_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables and views a user's query may name, sorted."""
    query = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY 1"
    return [name for (name,) in con.execute(query).fetchall()]
