"""Text a command hands to DuckDB or writes into JSON (a prefix, a run id, a query, a tag, a call's name) must be
UTF-8: Python decodes an argument or a line of other bytes (a shell's $'\\xff', a Latin-1 terminal) to surrogates,
which DuckDB and orjson refuse with a TypeError or a conversion error. Paths are not text here: they stay free."""

from __future__ import annotations

import click


def not_utf8(text: str) -> str | None:
    """Why ``text`` is not UTF-8 text (its first byte that is not), or None where it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        byte = f"the byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        return f"is not UTF-8 text ({byte} at character {exc.start + 1})"
    return None


def shown(text: str) -> str:
    """``text`` with what is not UTF-8 written as escapes (``\\xff``), printable on any terminal."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate of no byte (a lone \\ud800)
        return text.encode("utf-8", "backslashreplace").decode()


class Utf8Text(click.ParamType):
    """click's text, refused in one line where it is not UTF-8."""

    name = "text"

    def convert(self, value, param, ctx):
        why = not_utf8(value) if isinstance(value, str) else None
        if why is not None:
            self.fail(f"{shown(value)} {why}", param, ctx)
        return value


UTF8_TEXT = Utf8Text()
