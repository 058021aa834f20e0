"""JSON text as trace writers wrote it: what parsers refuse but has one meaning is read as meant, and what has not
is located for the message.

Kineto writes a name's bytes as it finds them. Bytes that are not UTF-8 (torch 1.8 wrote garbage in some names:
pytorch/kineto#80; text of another encoding; a character cut short) read as U+FFFD each, as a browser shows them.
A raw control character inside a string (a tab or newline of a Python frame's source line in a ``with_stack``
name: pytorch/pytorch#113001, #130622) is the character itself: JSON wants it escaped, and orjson and DuckDB refuse
it, but Python's json (strict=False) reads it so, and it is read so here, escaped in the text the readers get. A
quote that ends a string early, or a backslash that starts no escape (a Windows path: pytorch/pytorch#98432), has no
one reading: it is refused, and fault_in_strings says where, so that the file can be mended.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import orjson

BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark, which some editors write before the text
# the byte order marks of UTF-32 and UTF-16 (little-, big-endian): UTF-32-LE's first, as it begins with UTF-16-LE's
WIDE_MARKS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)
_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, decoded with surrogateescape
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)  # any string, escapes unchecked, raw bytes allowed
_CONTROL = re.compile(rb"[\x00-\x1f]")
_ESCAPES = {b"\b": rb"\b", b"\t": rb"\t", b"\n": rb"\n", b"\f": rb"\f", b"\r": rb"\r"}
# text that keeps JSON's rules on strings (escapes valid, each string followed by what may follow one), control
# characters and any bytes allowed in strings; possessive, so a match of gigabytes holds no backtracking state
_GOOD_STRINGS = re.compile(rb'(?:[^"]++|"[^"\\]*+(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\]*+)*+"(?=\s*+[,:}\]]))*+')
_ESCAPE = re.compile(rb"\\(?:.|$)", re.S)
_GOOD_ESCAPE = re.compile(rb'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})')
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
COUNT_EVENTS_LIMIT = 256 << 20  # the events before a fault are counted (a loop over tokens) up to this many bytes


@dataclass
class Readable:
    """JSON text as readable_text made it, and how many of each leniency it took."""

    data: bytes
    not_utf8: int = 0
    controls: int = 0
    surrogates: int = 0

    @property
    def lenient(self) -> bool:
        return bool(self.not_utf8 or self.controls or self.surrogates)


@dataclass
class Leniencies:
    """What of a trace's text was read leniently (readable_text), a count for each piece of text that held any
    (appended from the loading threads)."""

    not_utf8: list[int] = field(default_factory=list)
    controls: list[int] = field(default_factory=list)
    surrogates: list[int] = field(default_factory=list)

    def add(self, text: Readable) -> None:
        for kind in ("not_utf8", "controls", "surrogates"):
            if getattr(text, kind):
                getattr(self, kind).append(getattr(text, kind))

    def clear(self) -> None:
        self.not_utf8.clear()
        self.controls.clear()
        self.surrogates.clear()

    def notes(self, path: str) -> list[str]:
        """A sentence for each leniency the trace took."""
        notes = []
        if self.not_utf8:
            count = sum(self.not_utf8)
            notes.append(
                f"{path}: holds {count:,} byte{'s' if count > 1 else ''} that {'are' if count > 1 else 'is'}"
                " not UTF-8, read as U+FFFD (\ufffd)"
            )
        if self.controls:
            count = sum(self.controls)
            notes.append(
                f"{path}: holds {count:,} control character{'s' if count > 1 else ''} (a tab, a newline…) written"
                " raw inside strings, where JSON escapes them, read as the characters they are"
            )
        if self.surrogates:
            count = sum(self.surrogates)
            notes.append(
                f"{path}: holds {count:,} "
                + ("escapes of lone UTF-16 surrogates" if count > 1 else "escape of a lone UTF-16 surrogate")
                + f" (\\ud800…) in strings, which name{'' if count > 1 else 's'} no character, read as U+FFFD (\ufffd)"
            )
        return notes


def wide_encoding(data: bytes) -> str | None:
    """``"UTF-32"`` or ``"UTF-16"`` where ``data`` is text in it, not UTF-8: its byte order mark, or its first two
    characters ASCII (JSON's are) each in four bytes, three of them 0, or each in two, one of them 0; else None."""
    for mark, name in WIDE_MARKS:
        if data.startswith(mark):
            return name
    chars = (data[0:4], data[4:8]) if len(data) >= 8 else ()
    little = all(char[0] and char[1:] == b"\x00\x00\x00" for char in chars)
    if chars and (little or all(char[:3] == b"\x00\x00\x00" and char[3] for char in chars)):
        return "UTF-32"
    head = data[:4]
    if len(head) == 4 and all(bool(head[i]) != bool(head[i + 1]) for i in (0, 2)):
        return "UTF-16"
    return None


def loads_readable(data: bytes, leniencies: Leniencies | None = None):
    """orjson.loads of ``data``, or where that fails, of its readable_text (its leniencies added to
    ``leniencies``); the first parse's JSONDecodeError where the text needs no leniency or fails all the same."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        text = readable_text(bytes(data))
        if not text.lenient:
            raise
    value = orjson.loads(text.data)
    if leniencies is not None:
        leniencies.add(text)
    return value


def read_file_leniently(file: str, leniencies: Leniencies) -> bool:
    """Rewrite the JSON file ``file`` as readable_text reads it; whether it took any leniency (counted in
    ``leniencies``)."""
    with open(file, "rb") as raw:
        text = readable_text(raw.read())
    if not text.lenient:
        return False
    with open(file, "wb") as out:
        out.write(text.data)
    leniencies.add(text)
    return True


def readable_text(data: bytes) -> Readable:
    """``data`` with each byte that is not UTF-8 as U+FFFD, and each raw control character inside a string escaped
    (``\\t``, ``\\n``, ``\\u001b``); with their counts."""
    not_utf8 = 0
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        text, not_utf8 = _NOT_UTF8.subn("\ufffd", data.decode("utf-8", "surrogateescape"))
        data = text.encode()
    pieces: list[bytes] = []
    last = controls = surrogates = 0
    for match in _STRING.finditer(data):
        string = escaped = match.group()
        if _CONTROL.search(string) is not None:
            escaped, count = _CONTROL.subn(lambda c: _ESCAPES.get(c.group(), b"\\u%04x" % ord(c.group())), escaped)
            controls += count
        if b"\\u" in string and _SURROGATE.search(string) is not None:
            escaped, count = _lone_surrogates(escaped)
            surrogates += count
        if escaped is not string:
            pieces += (data[last : match.start()], escaped)
            last = match.end()
    if pieces:
        data = b"".join(pieces) + data[last:]
    return Readable(data, not_utf8, controls, surrogates)


_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
# each escape of a string in turn (an escaped backslash is one, so "\\\\ud800" holds none): a high surrogate and the low
# one after it (a pair, one character), a lone high or low one, or any other escape
_STRING_ESCAPE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})|\\.", re.S
)


def _lone_surrogates(string: bytes) -> tuple[bytes, int]:
    """``string`` (a JSON string) with each escape of a lone UTF-16 surrogate as ``\\ufffd`` (as long: an offset in
    it stays where it was), and how many: JSON's grammar allows them, but they name no character, and orjson and
    DuckDB refuse them."""
    lone = []
    fixed = _STRING_ESCAPE.sub(lambda m: lone.append(1) or b"\\ufffd" if m.group(1) else m.group(), string)
    return fixed, len(lone)


def fault_in_strings(data) -> tuple[int, str] | None:
    """The first place where a string of the JSON text ``data`` (bytes, or a mapped file) breaks JSON's rules in a
    way a parser cannot read past, and what it is: (byte offset, phrase); None where every string keeps them."""
    end = _GOOD_STRINGS.match(data).end()
    string = _STRING.match(data, end)
    if string is None:  # the text ends inside a string (a trace cut short): no fault of a string's
        return None
    escapes = _ESCAPE.finditer(data, end, string.end())
    escape = next((e for e in escapes if not _GOOD_ESCAPE.match(data, e.start())), None)
    if escape is not None:
        sequence = bytes(data[escape.start() : escape.start() + 2]).decode("utf-8", "replace")
        return escape.start(), f"a backslash that starts no JSON escape ({sequence}) inside a string (JSON writes \\\\)"
    after = bytes(data[string.end() : string.end() + 64]).lstrip()
    if not after:
        return None
    if after[:1] == b'"':
        return string.end() - 1, "a quote, then another string without a comma or colon between them"
    return string.end() - 1, 'an unescaped quote (") inside a string, which ends it early'


def event_at(data, offset: int) -> int | None:
    """The index in ``traceEvents`` (the document's, or a bare array) of the event that holds byte ``offset`` of the
    JSON text ``data``, or None where it lies outside the array (or too far into it to count)."""
    head = bytes(data[:64]).lstrip()
    if head.startswith(b"["):
        start = len(data[:64]) - len(head) + 1
    else:
        key = _EVENTS_KEY.search(data, 0, offset)
        if key is None:
            return None
        start = key.end()
    if offset - start > COUNT_EVENTS_LIMIT:
        return None
    depth, events = 1, 0
    for token in _TOKENS.finditer(data, start, offset):
        byte = data[token.start()]
        if byte in b"[{":
            events += depth == 1 and byte == ord("{")
            depth += 1
        elif byte in b"]}":
            depth -= 1
            if depth == 0:
                return None
    return events - 1 if depth > 1 and events else None


def describe_fault(data, decompressed: bool = False, at: int | None = 0) -> str | None:
    """Where and what breaks the JSON text ``data`` (a file's bytes, or what a gzip file ``decompressed`` to; or the
    traceEvents array alone, beginning at byte ``at`` of them, where known) inside a string, for a message: ``an
    unescaped quote (") inside a string, which ends it early, at byte 4096 in traceEvents[17]``; None where no
    string breaks JSON's rules."""
    fault = fault_in_strings(data)
    if fault is None:
        return None
    offset, what = fault
    index = event_at(data, offset)
    where = [] if at is None else [f"byte {at + offset}{' of the JSON it decompresses to' if decompressed else ''}"]
    where += [] if index is None else [f"traceEvents[{index}]"]
    return f"{what}, at {' in '.join(where) or 'an unknown place'}"
