"""A long table (``analyze --kernels --top-k 0`` of a large run, ``kernelscope sql`` of every event) drawn as rich
draws a table, without rich's layout engine: rich measures and renders every cell, about 5 ms a row of 12 columns on a
shared 2-core machine, so that the 85,000 kernel rows of a 200 MB trace took two minutes before the first line reached
``| head``. Here each column is as wide as its widest value (no name is folded to fit the terminal) and the rows are
written as they are made. A table written block by block (a query's result as DuckDB makes it) sizes its columns on
the blocks so far: a block with a wider value closes the table and opens another, with its header, as wide as needed."""

from __future__ import annotations

LONG_TABLE = 1000  # rows from which a table is drawn here
BATCH = 500  # rows written at once


def draws_long_table(console, rows: int) -> bool:
    """Whether a table of ``rows`` rows is drawn here: a long one, on a console that draws rich's box characters."""
    return rows >= LONG_TABLE and (console.encoding or "").lower().startswith("utf")


def print_long_table(console, headers: list[str], cells: list[list[str]], numerics: list[bool]) -> None:
    """``cells`` (one list of texts per column, control characters escaped) under ``headers``, in rich's heavy-head
    box, the header bold where the console styles text; numbers right-justified, names left."""
    table = LongTable(console, headers, numerics)
    table.write(cells)
    table.close()


class LongTable:
    """A long table written in blocks of rows (``write``), then ``close``d."""

    def __init__(self, console, headers: list[str], numerics: list[bool]):
        from rich.cells import cell_len

        self.console, self.headers, self.numerics = console, headers, numerics
        self.widths = [cell_len(h) for h in headers]
        self.open = False

    def write(self, cells: list[list[str]]) -> None:
        """One block: a list of texts per column, control characters escaped."""
        from rich.cells import cell_len

        widths = [max([width, *map(cell_len, column)]) for width, column in zip(self.widths, cells, strict=True)]
        if widths != self.widths or not self.open:
            self.close()
            self.widths = widths
            self._header()
        lines = []
        for row in zip(*cells, strict=True):
            lines.append("│" + "│".join(map(self._padded, row, self.widths, self.numerics)) + "│\n")
            if len(lines) == BATCH:
                self.console.file.write("".join(lines))
                lines = []
        self.console.file.write("".join(lines))
        self.console.file.flush()

    def close(self) -> None:
        if self.open:
            self.console.file.write(self._rule("└", "─", "┴", "┘") + "\n")
            self.console.file.flush()
            self.open = False

    def _header(self) -> None:
        from rich.text import Text

        header = Text("┃")
        for text, width, numeric in zip(self.headers, self.widths, self.numerics, strict=True):
            header.append(self._padded(text, width, numeric), style="bold")
            header.append("┃")
        self.console.print(self._rule("┏", "━", "┳", "┓"), markup=False, highlight=False, crop=False, soft_wrap=True)
        self.console.print(header, highlight=False, crop=False, soft_wrap=True)
        self.console.print(self._rule("┡", "━", "╇", "┩"), markup=False, highlight=False, crop=False, soft_wrap=True)
        self.open = True

    def _rule(self, left: str, fill: str, middle: str, right: str) -> str:
        return left + middle.join(fill * (width + 2) for width in self.widths) + right

    @staticmethod
    def _padded(text: str, width: int, numeric: bool) -> str:
        from rich.cells import cell_len

        gap = " " * (width - cell_len(text))
        return f" {gap}{text} " if numeric else f" {text}{gap} "
