"""Which files of a directory of plain traces are traces: a profiler's directory holds each rank's Kineto trace
beside JSON files of other kinds (an Execution Trace, a memory timeline, a tool's summary), which are left out.

A file is told apart by its first bytes (decompressed), never parsed whole unless it is that small: it is left
out only when they show it is no Kineto/Chrome trace. Anything else (a trace, a file that cannot be read or is not
JSON, a large object whose ``traceEvents`` lies further on) is the loader's, which loads it or says what it is.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from .errors import BadInputError
from .event_array import find_events_key, is_gzip, open_trace

SNIFF_BYTES = 1 << 20  # a Kineto trace's header before traceEvents is a few KB; an Execution Trace's a few hundred B
_EXECUTION_TRACE = re.compile(rb'\A\s*\{\s*"schema"\s*:\s*"[^"]*"[^\[{]*"nodes"\s*:\s*\[')  # its header keys
_JSON_KINDS = {list: "array", dict: "object", str: "string", int: "number", float: "number", bool: "boolean"}


def not_a_trace(path: Path) -> str | None:
    """What ``path`` is, when its first bytes show it is JSON of another kind than a Kineto/Chrome trace (a phrase:
    ``a PyTorch Execution Trace``); None for a trace, or for anything the loader is to read and judge."""
    try:
        with open_trace(path, is_gzip(path)) as stream:
            head = b""
            while len(head) < SNIFF_BYTES and (chunk := stream.read(SNIFF_BYTES - len(head))):
                head += chunk
            whole = not stream.read(1)
    except (BadInputError, OSError):
        return None
    text = head.lstrip()
    if text.startswith(b"["):
        first = text[1:].lstrip()[:1]
        if not first or first in b"{]n":  # events (the Chrome format's bare array), none, or a null first
            return None
        kind = {b"[": "array", b'"': "string", b"t": "boolean", b"f": "boolean"}.get(first, "number")
        return f"an array of {kind}s, not of events"
    if not text.startswith(b"{") or find_events_key(head) is not None:
        return None
    if _EXECUTION_TRACE.match(head):
        return "a PyTorch Execution Trace"
    if not whole:
        return None
    try:
        doc = orjson.loads(head)
    except orjson.JSONDecodeError:
        return None
    if isinstance(doc, dict) and isinstance(doc.get("nodes"), list):
        return "a PyTorch Execution Trace"
    return "a JSON object without traceEvents"
