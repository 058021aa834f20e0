"""Mutated parts of real traces, scanned by the native reader (_kineto.c) in buffers that end, or begin, at a
page the process may not touch: a read past either end faults at once instead of reading a neighbour's bytes.

tests/test_native_reader.py runs ``fuzz`` on the installed reader; run as a script (``python native_fuzz.py
MODULE.so``) it loads the reader from that file instead (a build with AddressSanitizer and UBSan: see
test_native_reader.py's sanitizer test), runs the same cases, the random parts of test_native_reader.py, every
sample trace whole and then test_native_reader.py and test_repeats_across_parts.py, and exits 0 only if all of them
passed.
"""

from __future__ import annotations

import ctypes
import gzip
import importlib.util
import mmap
import random
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = mmap.PAGESIZE
BOUNDARY = re.compile(rb"\}\s*,\s*(?=\{)")
NUMBER = re.compile(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?")
# texts spliced in where they are hardest to read: numbers of more than 15 significant digits (shortest_form),
# 16 to 20 integer digits (ts, pid, join keys), escapes, deep nesting, keys cut short
SPLICES = [
    b"0.33333333333333331",
    b"1234567890.1234567890123",
    b"9007199254740993.0",
    b"0.00012345678901234567",
    b"1666149715033200.123",
    b"99999999999999999",
    b"12345678901234567890",
    b"-9223372036854775809",
    b"00",
    b"012",
    b'"\\b\\f\\n\\r\\t\\/\\\\\\""',
    b'"\\u00e9"',
    b'"\\',
    b"[" * 80,
    b'{"a":' * 70,
    b'"External id"',
    b'"external id": 5',
    b'"correlation"',
    b'"1441273664"',
    b'"Kernel"',
    b'"[memory]"',
    b"null",
    b"tru",
    b"",
]


def sample_texts() -> list[bytes]:
    """The traceEvents arrays' bytes of a few real traces of different writers (H200 recordings, plain torch
    traces, the 2021 format, epoch timestamps), each cut to its first 256 KB."""
    names = [
        "mlp/trace.json.gz",
        "cuda_graph/trace.json.gz",
        "plain_kineto/misc.json.gz",
        "external/kineto_resnet50_autograd_api_2021-02.pt.trace.json.gz",
        "external/hta_event_sync_multi_stream.json.gz",
        "external/tl_h100_bert_small.json.gz",
    ]
    texts = []
    for name in names:
        raw = (REPO / "sample_traces" / name).read_bytes()
        text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        start = text.index(b"[", text.index(b'"traceEvents"')) + 1
        texts.append(text[start : start + (256 << 10)])
    return texts


def mutated_part(rng: random.Random, texts: list[bytes]) -> bytes:
    """A run of consecutive events of a real trace (bare: no brackets), mutated up to three times: a splice put
    over a number (which then often ends the buffer: the likeliest place for a read past the end) or at a random
    place, a byte changed, bytes dropped, or the part cut short anywhere."""
    text = rng.choice(texts)
    cuts = [m for m in BOUNDARY.finditer(text, 0, min(len(text), 128 << 10))]
    first = rng.randrange(len(cuts) - 1)
    last = min(len(cuts) - 1, first + rng.randrange(1, 12))
    part = bytearray(text[cuts[first].end() : cuts[last].start() + 1])  # whole events
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        kind = rng.random()
        if kind < 0.35 and part:
            numbers = list(NUMBER.finditer(part))
            if numbers:
                m = rng.choice(numbers)
                splice = rng.choice(SPLICES[:10])
                part[m.start() : m.end()] = splice
                if rng.random() < 0.5:
                    del part[m.start() + len(splice) :]  # the number ends the buffer
                continue
        if kind < 0.6:
            at = rng.randrange(len(part) + 1)
            part[at:at] = rng.choice(SPLICES)
        elif kind < 0.75 and part:
            part[rng.randrange(len(part))] = rng.randrange(256)
        elif kind < 0.85 and part:
            at = rng.randrange(len(part))
            del part[at : at + rng.randrange(1, 16)]
        else:
            del part[rng.randrange(len(part) + 1) :]
    return bytes(part)


class GuardedBuffers:
    """Two regions of memory, each next to a page mapped PROT_NONE: ``at_end(data)`` puts data so that it ends
    where the guard page begins, ``at_start(data)`` so that it begins where one ends."""

    def __init__(self, size: int = 1 << 20) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.pages = -(-size // PAGE)
        self.memory = mmap.mmap(-1, (2 * self.pages + 2) * PAGE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.memory))
        # layout: [data pages][guard][guard][data pages]
        for guard in (self.pages, self.pages + 1):
            if libc.mprotect(base + guard * PAGE, PAGE, 0) != 0:
                raise OSError(ctypes.get_errno(), "mprotect failed")
        self.view = memoryview(self.memory)

    def at_end(self, data: bytes) -> memoryview:
        end = self.pages * PAGE
        self.view[end - len(data) : end] = data
        return self.view[end - len(data) : end]

    def at_start(self, data: bytes) -> memoryview:
        start = (self.pages + 2) * PAGE
        self.view[start : start + len(data)] = data
        return self.view[start : start + len(data)]


def fuzz(scan, cases: int, seed: int) -> dict:
    """Scan ``cases`` mutated parts, each at the end and at the start of a guarded buffer, bare and as an array;
    every scan must give rows or a reason. Counts of each outcome."""
    rng = random.Random(seed)
    texts = sample_texts()
    buffers = GuardedBuffers()
    counts = {"rows": 0, "left": 0}
    for _ in range(cases):
        part = mutated_part(rng, texts)
        bare = rng.random() < 0.7
        data = part if bare else b"[" + part + b"]"
        for view in (buffers.at_end(data), buffers.at_start(data)):
            repeats = rng.random() < 0.5  # the reader also looks for the repeats of validate_repeats.sql
            scanned = scan(view, 0, bare, repeats)
            view.release()
            if scanned[0] is None:
                assert isinstance(scanned[1], str) and 0 <= scanned[2] <= len(data), (scanned, data)
                counts["left"] += 1
            else:
                assert scanned[0] >= 0 and scanned[2] >= 0, (scanned, data)
                assert scanned[3] in ((True, False) if repeats else (None,)), (scanned, data)
                counts["rows"] += 1
    return counts


def _load_reader(path: str):
    """The reader built at ``path``, in place of the installed one (before kernelscope.analyzer is imported)."""
    spec = importlib.util.spec_from_file_location("kernelscope.analyzer._kineto", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["kernelscope.analyzer._kineto"] = module
    return module


def main(path: str, cases: int) -> int:
    reader = _load_reader(path)
    from kernelscope.analyzer import ingest

    assert ingest.native_reader is reader, "the reader under test is the one ingest uses"
    print("guarded parts:", fuzz(reader.scan, cases, seed=20261201))
    import duckdb
    import pytest
    import test_native_reader as tests

    rng = random.Random(20261201)
    keys = []
    for i in range(cases):  # the random parts of the tests, scanned, every tenth inserted into DuckDB
        part = (tests._random_part, lambda r: tests._rule_event(r).encode(), tests._repeat_part)[i % 3](rng)
        scanned = reader.scan(part, 0, bool(i % 2 == 0), i % 4 < 2)
        if scanned[0] is not None and i % 10 == 1:
            tests._inserted(scanned).execute("SELECT * FROM events").fetchall()
        if scanned[0] is not None and scanned[4] is not None:
            keys.append(scanned[4])
            reader.repeated_across(keys[-rng.randrange(1, 5) :])  # the keys of a few parts, as of one trace
    traces = sorted((REPO / "sample_traces").glob("*/trace.json.gz")) + sorted(
        (REPO / "sample_traces").glob("external/*.json*")
    )
    for trace in traces:  # whole traces, through ingest: the Arrow export and DuckDB's insert too
        header = ingest.ingest_trace(duckdb.connect(), trace)
        assert header.native_parts and not header.duckdb_parts, (trace, header.duckdb_parts)
    # the reader's own tests but those that compare thousands of parts with DuckDB (scanned above, their keys asked
    # across parts too) and this one: under the sanitizers, with Python's allocator off, they took minutes
    selection = (
        "not random_parts_read_natively and not counts_the_events and not finds_the_repeats and not sanitizers"
        " and not random_traces_cut_into_parts"
    )
    across = Path(tests.__file__).with_name("test_repeats_across_parts.py")
    return pytest.main(["-q", "-p", "no:cacheprovider", str(Path(tests.__file__)), str(across), "-k", selection])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3000))
