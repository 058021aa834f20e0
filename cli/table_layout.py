"""How a table fits a terminal's width: which columns it shows, and where their headers break."""

from __future__ import annotations

NARROWEST_NAME = 12  # characters a folded name keeps per line in a table squeezed by a narrow terminal


def column_leasts(headers: list[str], numerics: list[bool], widests: list[int]) -> list[int]:
    """The narrowest each column's values may be drawn: a number is never cut over lines (31.359 as 31 / .3 / 59
    misreads), nor an id (one folded cannot be copied into --run), and a name folds no narrower than
    NARROWEST_NAME."""
    kept = [numeric or h == "id" or h.endswith("_id") for h, numeric in zip(headers, numerics, strict=True)]
    return [w if whole else min(w, NARROWEST_NAME) for w, whole in zip(widests, kept, strict=True)]


def left_out_note(width: int, left_out: list[str], every_column: str | None) -> str:
    """The line under a table that names the columns it left out and where to see them."""
    return f"left out to fit {width} columns: {', '.join(left_out)}; {every_column}"


def that_fit(headers: list[str], leasts: list[int], width: int) -> int:
    """How many columns, from the left, fit ``width`` with every header and name folded as narrow as it may (at
    least one): on an 80-column terminal a table of 12 columns wrapped each of its lines over two. A command puts
    the columns a first look needs first."""
    narrowest = [max(least, _narrowest(header)) for header, least in zip(headers, leasts, strict=True)]
    shown = len(headers)
    while shown > 1 and table_width(narrowest[:shown]) > width:
        shown -= 1
    return shown


def header_folds(headers: list[str], widests: list[int], leasts: list[int], width: int) -> list[int | None]:
    """Per column, the width its header folds to (None: one line), so that the table fits ``width`` where it can:
    on a narrow terminal the headers longer than their values break after an underscore (``time_`` /
    ``spent_us``), those that save the most first and only as many as needed, on two lines before more; then the
    names fold (to ``leasts``), their headers with them. A header never breaks inside a word."""
    widths = [max(len(header), widest) for header, widest in zip(headers, widests, strict=True)]
    folds: list[int | None] = [None] * len(headers)
    for fold_to, values in ((_two_lines, widests), (_narrowest, widests), (_narrowest, leasts)):
        targets = [max(value, fold_to(header)) for header, value in zip(headers, values, strict=True)]
        for i in sorted(range(len(headers)), key=lambda i: targets[i] - widths[i]):
            if table_width(widths) <= width:
                return folds
            if targets[i] < widths[i]:
                widths[i] = targets[i]
                folds[i] = targets[i] if targets[i] < len(headers[i]) else None
    return folds


def _two_lines(header: str) -> int:
    parts = _header_parts(header)
    splits = (max(len("".join(parts[:k])), len("".join(parts[k:]))) for k in range(1, len(parts)))
    return min(splits, default=len(header))


def _narrowest(header: str) -> int:
    return max(map(len, _header_parts(header)))


def table_width(widths: list[int]) -> int:
    return sum(widths) + 3 * len(widths) + 1  # with each column's padding and rule, and the last rule


def _header_parts(header: str) -> list[str]:
    """``time_spent_us`` as ``time_``, ``spent_``, ``us``: the places a header may break on a narrow terminal."""
    parts = [part + "_" for part in header.split("_")]
    parts[-1] = parts[-1][:-1]
    return [part for part in parts if part] or [""]


def folded_header(header: str, width: int) -> str:
    """``header`` on as few lines of at most ``width`` characters as its underscores allow (``time_`` /
    ``spent_us`` over a column of 10-character numbers): the column is then as narrow as its values."""
    lines: list[str] = []
    for part in _header_parts(header):
        if lines and len(lines[-1]) + len(part) <= width:
            lines[-1] += part
        else:
            lines.append(part)
    return "\n".join(lines)
