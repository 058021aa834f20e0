"""A trace document parsed whole, where its ``traceEvents`` array cannot be streamed out of it (event_array.py): a
bare array of events, a key before the array too large to read ahead or written with escapes, or a streamed cut
that failed (keys after the array that hold arrays). The array's own bytes become the one part, so that the
readers see what the file holds (a key twice in an event, which a parsed object would keep once) and read it as
they read a streamed part; a second top-level ``traceEvents`` is refused, as no rule says which array is the trace.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import BinaryIO

import orjson

from .errors import BadInputError, is_json_text, json_fault
from .json_blank_tail import trailing_blanks
from .json_text import BOM, Leniencies, loads_readable, readable_text, wide_encoding
from .trace_parts import ENDS_EARLY, TWO_ARRAYS, Limits, OnPart, Part, open_part_file, part_file, top_level_keys


def parse_document(
    path: Path,
    head: bytes,
    stream: BinaryIO,
    scratch: str,
    on_part: OnPart,
    limits: Limits,
    decompressed: bool,
    leniencies: Leniencies | None = None,
) -> dict:
    """Whole-document parse (``head``, then the rest of ``stream``: what a gzip file ``decompressed`` to), for JSON
    whose ``traceEvents`` is not where Kineto puts it: of at most ``limits.whole_document_bytes``, which the parse
    needs several times over in memory. Its traceEvents go to part 0 as written (events_text), or as read
    leniently (json_text.readable_text, counted in ``leniencies``) where it holds bytes that are not UTF-8 or raw
    control characters in strings; the other keys are returned."""
    room = limits.whole_document_bytes - len(head)
    data = head + stream.read(max(room, 0) + 1)
    if len(data) > limits.whole_document_bytes:
        if not is_json_text(data):  # a large binary file (an Nsight report): what it is, not its size
            reason = f"it begins with {data[:8]!r}, not as JSON text does"
            raise BadInputError(path, f"is not valid JSON ({json_fault(data[:4096], reason, decompressed, path)})")
        raise BadInputError(path, limits.whole_document_refusal())
    data = data[len(BOM) :] if data.startswith(BOM) else data  # a byte order mark an editor put before the JSON
    blank = trailing_blanks(data)  # after the document: zeros of space reserved and never written among them
    data = data[: len(data) - blank] if blank and b"\0" in data[len(data) - blank :] else data
    if not data.strip(b" \t\r\n\0"):  # orjson's word for it, 'Input is a zero-length, empty document', names no file
        held = "decompresses to no JSON: nothing, or" if decompressed else "holds no JSON:"
        raise BadInputError(path, f"{held} only blanks (whitespace, zero bytes)")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        closed = _closed_array(data) if exc.msg == "unexpected end of data" else None
        doc = _loads_or_none(closed)
        if closed is not None and doc is not None:
            data = closed
        else:
            data, doc = _read_leniently(path, data, exc, decompressed, leniencies)
    bare = isinstance(doc, list)
    if bare:  # the Chrome trace format also allows a bare array of events
        first = next((item for item in doc if item is not None), None)
        if first is not None and not isinstance(first, dict):  # a memory timeline (export_memory_timeline): arrays
            kind = _JSON_KINDS.get(type(first), "value")
            raise BadInputError(path, f"is JSON but not a Kineto/Chrome trace (an array of {kind}s, not of events)")
        if _legacy_export(doc):
            raise BadInputError(path, LEGACY_EXPORT)
        doc = {"traceEvents": doc}
    if isinstance(doc, dict) and isinstance(doc.get("nodes"), list) and "traceEvents" not in doc:
        raise BadInputError(
            path,
            "is a PyTorch Execution Trace (nodes, no traceEvents), not a Kineto trace: load the Kineto trace"
            " recorded with it",
        )
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise BadInputError(path, "is JSON but not a Kineto/Chrome trace (no traceEvents array)")
    events = data if bare else _events_text(path, data)
    with open_part_file(part_file(scratch, 0)) as out:
        out.write(orjson.dumps(doc["traceEvents"]) if events is None else events)
    doc.pop("traceEvents")
    on_part(0, Part(0, part_file(scratch, 0)))
    return doc


def _read_leniently(path, data: bytes, exc: orjson.JSONDecodeError, decompressed: bool, leniencies):
    """``data`` as read leniently (json_text.readable_text) and its document, where it holds bytes that are not UTF-8
    or raw control characters in strings; else the one sentence that says why it is not JSON."""
    text = readable_text(data)
    try:
        if not text.lenient:
            raise exc
        doc = orjson.loads(text.data)
    except orjson.JSONDecodeError as last:
        encoding = wide_encoding(data)
        if encoding is not None:
            raise BadInputError(path, f"is {encoding} text, not the UTF-8 JSON of a trace") from None
        if last.msg == "unexpected end of data":
            raise BadInputError(path, ENDS_EARLY) from None
        second = _second_document(text.data) if last.msg == "unexpected content after document" else None
        if second is not None:
            line, column, first_is_event = second
            problem = JSON_LINES if first_is_event else SEVERAL_DOCUMENTS
            raise BadInputError(path, problem.format(line, column)) from None
        fault = json_fault(data, last, decompressed, path, lenient=True)
        raise BadInputError(path, f"is not valid JSON ({fault})") from None
    if leniencies is not None:
        leniencies.add(text)
    return text.data, doc


SEVERAL_DOCUMENTS = (
    "holds several JSON documents one after another, the second at line {} column {} (traces concatenated into one"
    " file?): write each trace to a file of its own, in one folder, and load the folder (each file is the rank its"
    " distributedInfo.rank names)"
)


JSON_LINES = (
    "holds one JSON object per line (JSON Lines), the second at line {} column {}, each a trace event: a trace holds"
    ' its events in one array ([{{…}}, {{…}}] or {{"traceEvents": [{{…}}, {{…}}]}})'
)


def _second_document(data: bytes) -> tuple[int, int, bool] | None:
    """Where (line, column) a second JSON object or array begins after the first document of ``data``, which the
    parser found followed by more: ``cat rank0.json rank1.json``, or gzip members of traces; and whether the first is
    a trace event (an object with a "ph" and no traceEvents: events logged one per line). None where what follows is
    no document (garbage after a trace is said as the parser says it)."""
    text = data.decode("utf-8", "replace")
    try:  # the standard library's parser says where the first document ends, which orjson's error does not
        first, end = json.JSONDecoder(strict=False).raw_decode(text, len(text) - len(text.lstrip()))
    except ValueError:
        return None
    start = len(text) - len(text[end:].lstrip())
    if text[start : start + 1] not in ("{", "["):
        return None
    event = isinstance(first, dict) and "ph" in first and "traceEvents" not in first
    return text.count("\n", 0, start) + 1, start - text.rfind("\n", 0, start), event


def _closed_array(data: bytes) -> bytes | None:
    """``data`` with the "]" that the Chrome format lets a bare array of events leave off (a process that stopped
    while writing events, or writes them as they come), after its last whole event and a comma after it if any;
    None where ``data`` is no such array. A trace cut inside an event stays cut short."""
    text = data.rstrip()
    if not text.lstrip().startswith(b"["):
        return None
    text = text.removesuffix(b",").rstrip()
    return text + b"]" if text.endswith(b"}") else None


def _loads_or_none(data: bytes | None):
    try:
        return None if data is None else orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def _events_text(path: Path, data: bytes) -> memoryview | None:
    """The bytes of the top-level ``traceEvents`` array of the trace object ``data`` (valid JSON), or None where its
    key is written with escapes (the parsed array is then written instead). Refused where the object holds the key
    twice: the parsed object keeps the last, the streamed cut reads the first."""
    found = find_events_key(data)
    if found is None:
        return None
    key_start, array_start = found
    view = memoryview(data)
    try:
        orjson.loads(view[array_start:])
    except orjson.JSONDecodeError as exc:  # the array, then the rest of the object: "unexpected content"
        end = array_start + _byte_offset(view[array_start:], exc.pos)
    else:  # the array alone: not where find_events_key found it in a valid trace object
        return None
    if data.count(b'"traceEvents"') > 1:  # the object's own keys, its array left out
        if top_level_keys(data[:array_start] + b"[]" + data[end:]).count("traceEvents") > 1:
            raise BadInputError(path, TWO_ARRAYS)
    return view[array_start:end]


def _byte_offset(data: memoryview, char_pos: int) -> int:
    """The byte offset in UTF-8 ``data`` of character ``char_pos`` (orjson counts characters)."""
    head = bytes(data[: char_pos * 4])
    return char_pos if head.isascii() else len(head.decode("utf-8", "ignore")[:char_pos].encode())


# torch.autograd.profiler's own exporter (EventList.export_chrome_trace: torch's legacy profiler, and
# prof.function_events in later torch) writes a bare array of events of these processes, with no category but its
# flows' (cpu_to_cuda), no correlation and no External id: nothing says what an event is or what launched a kernel.
LEGACY_PIDS = ("CPU functions", "CUDA functions")
LEGACY_EXPORT = (
    "is a trace of torch.autograd.profiler's legacy exporter (EventList.export_chrome_trace: events of pid \"CPU"
    ' functions" without categories, correlations or External ids), which kernelscope cannot attribute: export'
    " the profile with torch.profiler.profile()'s export_chrome_trace"
)


def _legacy_export(events: list) -> bool:
    objects = [event for event in events if isinstance(event, dict)]
    legacy = any(event.get("pid") in LEGACY_PIDS for event in objects)
    return legacy and all(str(event.get("cat", "cpu_to_")).startswith("cpu_to_") for event in objects)


_JSON_KINDS = {list: "array", dict: "object", str: "string", int: "number", float: "number", bool: "boolean"}


def find_events_key(head: bytes) -> tuple[int, int] | None:
    """(offset of the key, offset of its array's ``[``) when ``"traceEvents"`` is a top-level key."""
    pos = head.find(b'"traceEvents"')
    while pos != -1:
        before = head[:pos].rstrip()
        after = head[pos + len(b'"traceEvents"') :]
        stripped = after.lstrip()
        if (before.endswith(b"{") or before.endswith(b",")) and stripped.startswith(b":"):
            rest = stripped[1:].lstrip()
            if rest.startswith(b"["):
                try:  # the keys before it, read as _parse_object in event_array.py reads them
                    loads_readable(before.removeprefix(BOM).rstrip(b",") + b"}")
                except orjson.JSONDecodeError:
                    pass
                else:
                    return pos, len(head) - len(rest)
        pos = head.find(b'"traceEvents"', pos + 1)
    return None
