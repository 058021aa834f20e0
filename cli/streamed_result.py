"""``kernelscope sql RUN QUERY`` printed to stdout as DuckDB makes the result, block by block: fetched whole, the
866,885 rows of ``SELECT * FROM events`` of a 200 MB trace became a DataFrame and every cell a text before the first
line reached ``| head`` (35 s). A result shorter than a long table is printed whole, as every other command's table
is; a file (``-o``) is written whole, atomically."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .long_table import LONG_TABLE, LongTable, draws_long_table
from .output import Output, emit, render, stdout_console, table_cells
from .rows import name_the_root

if TYPE_CHECKING:  # loaded where a command runs: --help and usage errors need none of it
    import duckdb
    import pandas as pd

BLOCK_VECTORS = 8  # DuckDB vectors (2,048 rows each) fetched and printed at once after the first rows


def print_result(con: duckdb.DuckDBPyConnection, query: str, output: Output, failed) -> None:
    """The result of ``query`` on stdout in ``output``'s format (not Parquet, which needs a file); ``failed`` turns a
    DuckDB error, raised when the query runs or later, while its rows are fetched, into the command's error."""
    import duckdb
    import pandas as pd
    from kernelscope.analyzer.user_queries import query_result

    fmt = output.format
    try:
        result = query_result(con, query)
        first = first_rows(result, LONG_TABLE)
    except duckdb.Error as exc:
        raise failed(exc) from None
    console = stdout_console() if fmt == "table" else None
    whole = console is not None and not draws_long_table(console, len(first))  # a table rich draws: all its rows
    if len(first) < LONG_TABLE or fmt == "parquet" or whole:
        try:
            rest = result.df() if len(first) >= LONG_TABLE else first.iloc[:0]
        except duckdb.Error as exc:
            raise failed(exc) from None
        emit(name_the_root(pd.concat([first, rest], ignore_index=True), output), output)
        return
    writer = _TableWriter(console) if console is not None else _TextWriter(fmt)
    try:
        block = first
        while len(block):
            writer.write(name_the_root(block, output))
            try:
                block = result.fetch_df_chunk(BLOCK_VECTORS)
            except duckdb.Error as exc:
                raise failed(exc) from None
    finally:
        writer.close()


def first_rows(result, rows: int) -> pd.DataFrame:
    """The first ``rows`` rows of a query's ``result`` or more (whole DuckDB vectors), fewer where it has fewer."""
    import pandas as pd

    blocks = [result.fetch_df_chunk()]
    while 0 < sum(map(len, blocks)) < rows and len(blocks[-1]):
        blocks.append(result.fetch_df_chunk(BLOCK_VECTORS))
    return pd.concat(blocks, ignore_index=True) if len(blocks) > 1 else blocks[0]


def rows_left(result) -> int:
    """How many rows ``result`` has still to give, fetched and dropped block by block."""
    left = 0
    while len(block := result.fetch_df_chunk(BLOCK_VECTORS)):
        left += len(block)
    return left


class _TableWriter:
    """Blocks as one long table (long_table.LongTable), each float column with the decimals of the blocks before."""

    def __init__(self, console):
        self.console, self.table, self.digits = console, None, {}

    def write(self, block: pd.DataFrame) -> None:
        from .printable import printable

        headers, numerics, cells = table_cells(block, self.digits)
        if self.table is None:
            self.table = LongTable(self.console, headers, numerics, every_column="--format csv shows them")
        self.table.write([[printable(v) for v in values] for values in cells])

    def close(self) -> None:
        if self.table is not None:
            self.table.close(last=True)


class _TextWriter:
    """Blocks as one CSV (one header), one JSON array, or JSON lines: the text output.emit writes of the whole."""

    def __init__(self, fmt: str):
        self.fmt, self.blocks = fmt, 0

    def write(self, block: pd.DataFrame) -> None:
        import sys

        from .output import escaped

        text = render(escaped(block) if sys.stdout.isatty() else block, self.fmt, header=self.blocks == 0)
        if self.fmt == "json":  # the block's records, without their array's brackets and newline
            text = ("[" if self.blocks == 0 else ",") + text[1:-2]
        self.blocks += 1
        click.echo(text, nl=False, color=True)

    def close(self) -> None:
        if self.fmt == "json" and self.blocks:
            click.echo("]", color=True)
