"""A long table (``analyze --kernels --top-k 0`` of a large run, ``kernelscope sql`` of every event) drawn as rich
draws a table, without rich's layout engine: rich measures and renders every cell, about 5 ms a row of 12 columns on a
shared 2-core machine, so that the 85,000 kernel rows of a 200 MB trace took two minutes before the first line reached
``| head``. Here the rows are written as they are made, and the table fits the terminal as print_table's does
(table_layout.py): the columns that do not fit are left out from the right and named under it, headers break after an
underscore, and a name wider than its column folds over lines (a number or an id never does). A table written block
by block (a query's result as DuckDB makes it) sizes its columns on the blocks so far: a block with a wider value
closes the table and opens another, with its header, as wide as needed, without the columns that then no longer fit
(the line under it names them and the row from which they are left out)."""

from __future__ import annotations

from .table_layout import column_leasts, folded_header, header_folds, left_out_note, table_width, that_fit

LONG_TABLE = 1000  # rows from which a table is drawn here
BATCH = 500  # rows written at once


def draws_long_table(console, rows: int) -> bool:
    """Whether a table of ``rows`` rows is drawn here: a long one, on a console that draws rich's box characters."""
    return rows >= LONG_TABLE and (console.encoding or "").lower().startswith("utf")


def print_long_table(
    console, headers: list[str], cells: list[list[str]], numerics: list[bool], every_column: str | None = None
) -> None:
    """``cells`` (one list of texts per column, control characters escaped) under ``headers``, in rich's heavy-head
    box, the header bold where the console styles text; numbers right-justified, names left. ``every_column``: as
    print_table's (None: no column is left out)."""
    table = LongTable(console, headers, numerics, every_column)
    table.write(cells)
    table.close(last=True)


class LongTable:
    """A long table written in blocks of rows (``write``), then ``close``d with ``last=True``."""

    def __init__(self, console, headers: list[str], numerics: list[bool], every_column: str | None = None):
        self.console, self.headers, self.numerics, self.every_column = console, headers, numerics, every_column
        self.shown: int | None = None  # the columns that fit the blocks so far: fewer where a later one is wider
        self.left_from: dict[str, int] = {}  # a column left out after the first block: the first row without it
        self.rows = 0
        self.widests = [0] * len(headers)
        self.widths: list[int] = []
        self.folds: list[int | None] = []
        self.open = False

    def write(self, cells: list[list[str]]) -> None:
        """One block: a list of texts per column, control characters escaped."""
        from rich.cells import cell_len

        block = [max(map(cell_len, column), default=0) for column in cells]
        self.widests = [max(a, b) for a, b in zip(self.widests, block, strict=True)]
        self._fit_columns()
        cells, block = cells[: self.shown], block[: self.shown]
        self.rows += len(cells[0]) if cells else 0
        widths, folds = self._layout()
        if widths != self.widths or folds != self.folds or not self.open:
            self.close()
            self.widths, self.folds = widths, folds
            self._header()
        folding = [i for i, (width, widest) in enumerate(zip(widths, block, strict=True)) if widest > width]
        lines = []
        for row in zip(*cells, strict=True):
            # a text is at least as wide as it is long, and an ASCII one no wider: _fold measures the others
            if folding and any(len(row[i]) > widths[i] or not row[i].isascii() for i in folding):
                lines.extend(self._folded_row(row))
            else:
                lines.append(self._line(row))
            if len(lines) >= BATCH:
                self.console.file.write("".join(lines))
                lines = []
        self.console.file.write("".join(lines))
        self.console.file.flush()

    def _fit_columns(self) -> None:
        """The columns that fit the terminal with the values so far, from the left: a block of wider numbers leaves
        out the last ones from its first row on, where it opened a table wider than the terminal."""
        if self.every_column is None:
            self.shown = len(self.headers)
            return
        leasts = column_leasts(self.headers, self.numerics, self.widests)
        fits = that_fit(self.headers[: self.shown], leasts[: self.shown], self.console.width)
        if self.shown is not None:
            self.left_from.update((header, self.rows + 1) for header in self.headers[fits : self.shown])
        self.shown = fits

    def close(self, last: bool = False) -> None:
        """End the table drawn so far; ``last``: the table is done, and a line names the columns left out."""
        if self.open:
            self.console.file.write(self._rule("└", "─", "┴", "┘") + "\n")
            self.console.file.flush()
            self.open = False
        if last and self.shown is not None and self.shown < len(self.headers):
            from .output import print_note

            print_note(left_out_note(self.console.width, self._left_out(), self.every_column), self.console)

    def _left_out(self) -> list[str]:
        """The columns left out, those a later block's cut left out with its first row: ``g, h (from row 2,049)``."""
        from itertools import groupby

        cut = groupby(self.headers[self.shown :], key=self.left_from.get)
        return [", ".join(headers) + ("" if row is None else f" (from row {row:,})") for row, headers in cut]

    def _layout(self) -> tuple[list[int], list[int | None]]:
        """Each shown column's width and its header's fold: as wide as its widest value and header, and where the
        table is wider than the terminal, its names narrowed (the widest first) no further than print_table's."""
        headers, numerics, widests = (part[: self.shown] for part in (self.headers, self.numerics, self.widests))
        leasts = column_leasts(headers, numerics, widests)
        folds = header_folds(headers, widests, leasts, self.console.width)
        heads = [len(header) if fold is None else fold for header, fold in zip(headers, folds, strict=True)]
        widths = [max(widest, head) for widest, head in zip(widests, heads, strict=True)]
        minimums = [max(least, head) for least, head in zip(leasts, heads, strict=True)]
        excess = table_width(widths) - self.console.width
        while excess > 0:
            narrowable = [i for i in range(len(widths)) if widths[i] > minimums[i]]
            if not narrowable:
                break  # the first column alone is wider than the terminal: drawn wider, as print_table does
            i = max(narrowable, key=widths.__getitem__)
            to = max(minimums[i], widths[i] - excess, *(widths[j] for j in narrowable if j != i))
            to = min(to, widths[i] - 1)
            excess -= widths[i] - to
            widths[i] = to
        return widths, folds

    def _header(self) -> None:
        from rich.text import Text

        parts = [
            (header if fold is None else folded_header(header, fold)).split("\n")
            for header, fold in zip(self.headers, self.folds, strict=False)
        ]
        height = max(map(len, parts))
        self.console.print(self._rule("┏", "━", "┳", "┓"), markup=False, highlight=False, crop=False, soft_wrap=True)
        for line in range(height):  # a folded header sits at the bottom of its cell, as rich draws it
            header = Text("┃")
            for lines, width, numeric in zip(parts, self.widths, self.numerics, strict=False):
                text = lines[line - height + len(lines)] if line >= height - len(lines) else ""
                header.append(self._padded(text, width, numeric), style="bold")
                header.append("┃")
            self.console.print(header, highlight=False, crop=False, soft_wrap=True)
        self.console.print(self._rule("┡", "━", "╇", "┩"), markup=False, highlight=False, crop=False, soft_wrap=True)
        self.open = True

    def _line(self, row) -> str:
        return "│" + "│".join(map(self._padded, row, self.widths, self.numerics)) + "│\n"

    def _folded_row(self, row) -> list[str]:
        """A row whose names are wider than their columns, on as many lines as its longest takes."""
        parts = [_fold(text, width) for text, width in zip(row, self.widths, strict=True)]
        height = max(map(len, parts))
        return [self._line([lines[i] if i < len(lines) else "" for lines in parts]) for i in range(height)]

    def _rule(self, left: str, fill: str, middle: str, right: str) -> str:
        return left + middle.join(fill * (width + 2) for width in self.widths) + right

    @staticmethod
    def _padded(text: str, width: int, numeric: bool) -> str:
        if text.isascii():  # as wide as it is long: a folded row is several lines, each padded
            gap = " " * (width - len(text))
        else:
            from rich.cells import cell_len

            gap = " " * (width - cell_len(text))
        return f" {gap}{text} " if numeric else f" {text}{gap} "


def _fold(text: str, width: int) -> list[str]:
    """``text`` on lines of at most ``width`` cells, broken at spaces where it can and inside a word where not."""
    from rich.cells import cell_len, chop_cells

    # an ASCII name (nearly every one) is as wide as it is long: measured and cut by len and slices, 4x faster
    ascii_only = text.isascii()
    measure = len if ascii_only else cell_len
    if measure(text) <= width:
        return [text]
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        joined = f"{line} {word}" if line else word
        if measure(joined) <= width:
            line = joined
            continue
        if line:
            lines.append(line)
        if ascii_only:
            pieces = [word[i : i + width] for i in range(0, len(word), width)] or [""]
        else:
            pieces = chop_cells(word, width) or [""]
        lines.extend(pieces[:-1])
        line = pieces[-1]
    return [*lines, line]
