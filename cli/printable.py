"""Text a terminal shows as it is: a name from a trace, a manifest or a folder, escaped so that it cannot end a line,
forge another or drive the terminal. Here, not in the analyzer, so that the command line's usage errors print
without importing the analyzer (DuckDB, pandas: ~0.4 s); the analyzer's messages use it too."""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, the line and paragraph separators and the bidirectional overrides and isolates:
# characters that would move the cursor, set a terminal's title, end the line or reorder what is shown
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every control character escaped as Python writes it (``\\n``, ``\\x1b``, ``\\u2028``), so that
    a name from a trace prints as one line of plain characters."""
    return _UNPRINTABLE.sub(lambda match: repr(match.group())[1:-1], text)


def shell_word(text: str) -> str:
    """``text`` quoted for a shell command to copy (shlex.quote), as one printable word: where it holds a control
    character, in bash's ``$'…'``, which writes it as an escape the shell turns back into the character."""
    import shlex

    if not _UNPRINTABLE.search(text):
        return shlex.quote(text)
    escaped = text.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + _UNPRINTABLE.sub(lambda match: _c_escape(match.group()), escaped) + "'"


def _c_escape(character: str) -> str:
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"
