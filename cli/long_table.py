"""A long table (``analyze --kernels --top-k 0`` of a large run) drawn as rich draws a table, without rich's layout
engine: rich measures and renders every cell, about 5 ms a row of 12 columns on a shared 2-core machine, so that the
85,000 kernel rows of a 200 MB trace took two minutes before the first line reached ``| head``. Here each column is
as wide as its widest value (no name is folded to fit the terminal) and the rows are written as they are made."""

from __future__ import annotations

LONG_TABLE = 1000  # rows from which a table is drawn here
BATCH = 500  # rows written at once


def draws_long_table(console, rows: int) -> bool:
    """Whether a table of ``rows`` rows is drawn here: a long one, on a console that draws rich's box characters."""
    return rows >= LONG_TABLE and (console.encoding or "").lower().startswith("utf")


def print_long_table(console, headers: list[str], cells: list[list[str]], numerics: list[bool]) -> None:
    """``cells`` (one list of texts per column, control characters escaped) under ``headers``, in rich's heavy-head
    box, the header bold where the console styles text; numbers right-justified, names left."""
    from rich.cells import cell_len
    from rich.text import Text

    widths = [max([cell_len(h), *map(cell_len, column)]) for h, column in zip(headers, cells, strict=True)]

    def rule(left: str, fill: str, middle: str, right: str) -> str:
        return left + middle.join(fill * (width + 2) for width in widths) + right

    def padded(text: str, width: int, numeric: bool) -> str:
        gap = " " * (width - cell_len(text))
        return f" {gap}{text} " if numeric else f" {text}{gap} "

    header = Text("┃")
    for text, width, numeric in zip(headers, widths, numerics, strict=True):
        header.append(padded(text, width, numeric), style="bold")
        header.append("┃")
    console.print(rule("┏", "━", "┳", "┓"), markup=False, highlight=False, crop=False, soft_wrap=True)
    console.print(header, highlight=False, crop=False, soft_wrap=True)
    console.print(rule("┡", "━", "╇", "┩"), markup=False, highlight=False, crop=False, soft_wrap=True)
    lines = []
    for row in zip(*cells, strict=True):
        lines.append("│" + "│".join(map(padded, row, widths, numerics)) + "│\n")
        if len(lines) == BATCH:
            console.file.write("".join(lines))
            lines = []
    console.file.write("".join(lines) + rule("└", "─", "┴", "┘") + "\n")
    console.file.flush()
