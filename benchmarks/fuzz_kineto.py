"""Seeds for the native reader's libFuzzer harness (libfuzzer/fuzz_kineto.c), and the check of its corpus against
DuckDB.

    python benchmarks/fuzz_kineto.py seeds DIR     # parts of every sample trace, and hand-made edge cases
    python benchmarks/fuzz_kineto.py diff DIR...   # every input of the corpora: native rows == DuckDB's rows

The harness checks memory safety and what the reader's output must hold on its own; ``diff`` checks that every
part the native reader reads gives exactly the rows of DuckDB's JSON reader (ingest.sql), the fallback, and the
answer of validate_repeats.sql on them, as tests/test_native_reader.py does for its random parts. It prints the
counts (read, left to DuckDB) and each disagreement, and exits 1 if there was one.
benchmarks/libfuzzer/fuzz_kineto.sh runs both around the fuzzer.
"""

from __future__ import annotations

import gzip
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BOUNDARY = re.compile(rb"\}\s*,\s*(?=\{)")

# what the reader decides on one byte at a time: numbers at the edge of its exact range, every escape, text
# outside ASCII, keys twice, nesting at its limit, ids past 64 bits
EDGE_CASES = [
    b'[{"ph":"X","cat":"kernel","name":"k","pid":1,"tid":2,"ts":9999999999999999.999,"dur":0,"args":{"correlation":1}}]',
    b'[{"ph":"X","ts":-9999999999999999.999,"dur":-0.001}]',
    b'[{"ph":"X","ts":1e400,"dur":1E-400}]',
    b'[{"ph":"X","ts":123456789012345678901234567890,"dur":0.0001}]',
    b'[{"args":{"x":123456789012345678901234567890,"y":-9223372036854775809,"z":18446744073709551616}}]',
    b'[{"args":{"x":1234567890123456.5,"y":0.33333333333333331,"z":0.000001,"w":100.000}}]',
    b'[{"args":{"correlation":9223372036854775807,"External id":-9223372036854775808,"device":2147483648}}]',
    b'[{"args":{"correlation":1,"correlation":2}}]',
    b'[{"ph":"X","ph":"i"}]',
    b'[{"name":"a\\u0000b","cat":"\\ud800","ph":"\\udc00\\ud800"}]',
    b'[{"name":"\xc3\x28","cat":"\xed\xa0\x80","ph":"\xf4\x90\x80\x80"}]',
    b'[{"name":"\\"\\\\\\/\\b\\f\\n\\r\\t"}]',
    b'[{"name":"abc\\',
    b'[{"name":"abc\\u12',
    b'[{"name":"abc',
    b'[{"args":{"a":' + b"[" * 64 + b"]" * 64 + b"}}]",
    b'[{"args":{"a":' + b"[" * 65 + b"]" * 65 + b"}}]",
    b'[{"pid":"1441273664","tid":"-0","ts":"1","dur":"x"},{"pid":"01","tid":"Spans"}]',
    b'[{"pid":99999999999999999999,"tid":-99999999999999999999}]',
    b'[{"pid":1.0,"tid":true}]',
    b'[{"ph":"i","name":"[memory]"},{"cat":"Kernel","ph":"X"},{"cat":"kernel"}]',
    b"[ ]",
    b"[",
    b"",
    b' \t\r\n{"ph":"X"} , {"ph":"X"}\n',
]


def seeds(out: Path) -> int:
    """Parts of 1 to 24 events of every sample trace (at most 8 KB each), both forms, and EDGE_CASES."""
    out.mkdir(parents=True, exist_ok=True)
    traces = sorted((REPO / "sample_traces").glob("*/trace.json.gz"))
    traces += sorted((REPO / "sample_traces" / "external").glob("*.json*"))
    written = 0
    for trace in traces:
        raw = trace.read_bytes()
        text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        start = text.index(b"[", text.index(b'"traceEvents"')) + 1
        cuts = list(BOUNDARY.finditer(text, start, start + (1 << 20)))
        for i, first in enumerate(range(0, len(cuts) - 1, max(1, len(cuts) // 40))):
            last = min(len(cuts) - 1, first + 1 + i % 24)
            part = text[cuts[first].end() : cuts[last].start() + 1][: 8 << 10]
            bare = i % 2
            data = part if bare else b"[" + part + b"]"
            (out / f"{trace.parent.name}-{trace.name.split('.')[0]}-{i}").write_bytes(bytes([bare]) + data)
            written += 1
    for i, case in enumerate(EDGE_CASES):
        (out / f"edge-{i}").write_bytes(b"\x00" + case)
        written += 1
    return written


def diff(corpora: list[Path]) -> int:
    sys.path.insert(0, str(REPO / "tests"))
    import test_native_reader as tests
    from kernelscope.analyzer.ingest import native_reader
    from kernelscope.analyzer.sql import define_scope_names, sql_text

    read = left = 0
    bad = []
    macros = False  # the macros validate_repeats.sql reads (ks_launch_category), on DuckDB's reader's connection
    with tempfile.TemporaryDirectory() as scratch:
        for corpus in corpora:
            for file in sorted(corpus.iterdir()):
                data = file.read_bytes()
                if not data:
                    continue
                bare, part = bool(data[0] & 1), data[1:]
                native = tests._read_natively(part, bare)
                if isinstance(native, str):
                    left += 1
                    continue
                read += 1
                duck = tests._read_with_duckdb(part if not bare else b"[" + part + b"]", Path(scratch))
                if native != duck:
                    bad.append(file)
                    print(f"{file}: native {native!r}\n  duckdb {duck!r}", file=sys.stderr)
                    continue
                con = tests._CONNECTIONS["duckdb"]  # holds the rows DuckDB's reader read
                if not macros:
                    define_scope_names(con, "ks.module:", "ks.fn:")
                    macros = True
                repeats = con.execute(sql_text("validate_repeats.sql")).fetchone()[0]
                if native_reader.scan(part, 0, bare, True)[3] is not repeats:
                    bad.append(file)
                    print(f"{file}: validate_repeats.sql says {repeats}, the native reader not", file=sys.stderr)
    print(f"read natively {read}, left to DuckDB {left}, disagreements {len(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("seeds", help="write the seeds into DIR").add_argument("dir", type=Path)
    commands.add_parser("diff", help="compare every input of the corpora with DuckDB").add_argument(
        "dirs", type=Path, nargs="+"
    )
    options = parser.parse_args()
    if options.command == "seeds":
        print(seeds(options.dir), "seeds")
        sys.exit(0)
    sys.exit(diff(options.dirs))
