"""Structure-aware mutations of a part of three events (an operator, its launch, its kernel), scanned by the
native reader (analyzer/_kineto.c) in guarded buffers, bare and as an array, with and without the repeats check;
every seventh part read is inserted into DuckDB from its Arrow stream. Beside tests/native_fuzz.py's random
splices: the part cut at every byte (both halves); each field and join key of each event set to a number at the
limits (2^63 and past it, 1e309, 4.9e-324, 400 digits, ts*1000 past 2^63), a string (1 MiB, 50,000 escaped NULs,
lone and paired surrogates, escapes cut short, bytes not UTF-8), nesting 100,000 deep; each also cut at a random
byte and written as a second, duplicate key; long strings and deep nesting as a name, an args value and an args key.

    python benchmarks/native_structured_fuzz.py MODULE.so [--seed N]

MODULE.so: a build of _kineto.c, with AddressSanitizer and UBSan as test_native_reader.py's sanitizer test makes it
(gcc -shared -fPIC -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all), run with libasan and libstdc++
preloaded and PYTHONMALLOC=malloc; a sanitizer report aborts the run. Prints the counts of parts read and left to
DuckDB.
"""

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import native_fuzz  # noqa: E402

KERNEL = {
    "ph": "X",
    "cat": "kernel",
    "name": "k",
    "pid": 0,
    "tid": 7,
    "ts": 1000.5,
    "dur": 2.25,
    "args": {"correlation": 5, "device": 0, "stream": 7, "External id": 3},
}
LAUNCH = {
    "ph": "X",
    "cat": "cuda_runtime",
    "name": "cudaLaunchKernel",
    "pid": 1,
    "tid": 2,
    "ts": 999.0,
    "dur": 1.0,
    "args": {"correlation": 5, "External id": 3},
}
OP = {
    "ph": "X",
    "cat": "cpu_op",
    "name": "aten::mm",
    "pid": 1,
    "tid": 2,
    "ts": 998.0,
    "dur": 5.0,
    "args": {"External id": 3, "Sequence number": 1},
}
FIELDS = ["ts", "dur", "pid", "tid", "name", "cat", "ph"]
ARGS = ["correlation", "device", "stream", "External id"]
NUMBERS = [
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775808",
    b"-9223372036854775809",
    b"18446744073709551616",
    b"1e308",
    b"1e309",
    b"-1e309",
    b"1e-308",
    b"4.9e-324",
    b"-0",
    b"-0.0",
    b"0e0",
    b"9223372036854775.807",
    b"9223372036854776",
    b"9223372036854775.808",
    b"-9223372036854775.809",
    b"1" * 400,
    b"0." + b"0" * 400 + b"1",
    b"1" * 30 + b"." + b"9" * 30,
    b"1e",
    b"-",
    b"0x10",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b'"1e400"',
    b'"NaN"',
    b'"9223372036854775808"',
    b'""',
    b'" 12 "',
    b"true",
    b"null",
    b"[]",
    b"{}",
    b"1.5e3",
    b"12345678901234567890123",
    b"0.1e-2147483649",
    b"1e2147483648",
    b"1E+00000000000000000000000000002",
]
STRINGS = [
    b'"' + b"a" * (1 << 20) + b'"',
    b'"' + b"\\u0000" * 50000 + b'"',
    b'"\\ud800"',
    b'"\\udc00"',
    b'"\\ud800\\u0041"',
    b'"\\ud800\\ud800"',
    b'"\\u12"',
    b'"\\ud800\\u"',
    b'"\\u00"',
    b'"\\',
    b'"\\u',
    b'"\x00"',
    b'"\xff\xfe"',
    b'"\xed\xa0\x80"',
    b'"\xc3"',
    b'"\xf4\x90\x80\x80"',
    b'"\\uD834\\uDD1E"',
    b'"' + b"\\\\" * 100000 + b'"',
    b'"%C3%"',
    b'"\\/\\b\\f"',
    b'"' + b"\xe9" * 70000 + b'"',
]
DEEP = [
    b"[" * 100000 + b"]" * 100000,
    b'{"a":' * 50000 + b"1" + b"}" * 50000,
    b"[" * 100000,
    b"[" * 5000 + b'"\\u',
    b'{"a":[{"b":' * 20000 + b"]",
]


def enc(obj):
    return json.dumps(obj).encode()


def scan_all(reader, tests, buffers, data: bytes, seen: dict) -> None:
    """Scan ``data`` bare and as an array, at the end and at the start of a guarded buffer (a larger one as it is),
    with and without the repeats check; a part read is checked by DuckDB's insert now and then."""
    for bare in (True, False):
        d = data if bare else b"[" + data + b"]"
        for view in (buffers.at_end(d), buffers.at_start(d)) if len(d) < (4 << 20) else (d,):
            for repeats in (False, True):
                r = reader.scan(view, 0, bare, repeats)
                if r[0] is None:
                    seen["left"] += 1
                else:
                    seen["rows"] += 1
                    if seen["rows"] % 7 == 0:
                        tests._inserted(r[1]).execute("SELECT * FROM events").fetchall()
            if isinstance(view, memoryview):
                view.release()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="the reader build to load (a .so of _kineto.c)")
    parser.add_argument("--seed", type=int, default=0, help="for the random cuts")
    args = parser.parse_args()
    reader = native_fuzz._load_reader(args.module)
    import test_native_reader as tests

    buffers = native_fuzz.GuardedBuffers(4 << 20)
    rng = random.Random(args.seed)
    seen = {"rows": 0, "left": 0, "cases": 0}
    t = time.time()
    base = b", ".join(enc(e) for e in (OP, LAUNCH, KERNEL))
    for i in range(len(base) + 1):  # truncated at every byte
        seen["cases"] += 1
        scan_all(reader, tests, buffers, base[:i], seen)
        scan_all(reader, tests, buffers, base[i:], seen)
    for event in (KERNEL, LAUNCH, OP):
        text = enc(event)
        for field in FIELDS + ARGS:
            for value in NUMBERS + STRINGS[:12] + DEEP[:2]:
                key = f'"{field}": '.encode()
                if key not in text:
                    continue
                at = text.index(key) + len(key)
                end = at
                depth = 0
                while end < len(text):  # the value's end: the next , or } at depth 0
                    c = text[end : end + 1]
                    if c in b"[{":
                        depth += 1
                    elif c in b"]}":
                        if depth == 0:
                            break
                        depth -= 1
                    elif c == b"," and depth == 0:
                        break
                    end += 1
                mutated = text[:at] + value + text[end:]
                others = b", ".join(enc(e) for e in (OP, LAUNCH, KERNEL) if e is not event)
                seen["cases"] += 2
                scan_all(reader, tests, buffers, mutated + b", " + others, seen)
                scan_all(reader, tests, buffers, mutated[: rng.randrange(len(mutated) + 1)], seen)
                twice = text[:-1] + b", " + key + value + b"}"  # the key twice, the bad value second
                scan_all(reader, tests, buffers, twice + b", " + others, seen)
    for value in STRINGS + DEEP:
        for where in (b'"name": ', b'"args": ', b'"args": {"x": ', b'"args": {'):
            text = enc(KERNEL)
            if where == b'"args": {':
                mutated = text.replace(where, where + value + b": 1, ", 1)  # as a key
            else:
                mutated = text.replace(
                    where, where + value + (b', "y": ' if where.endswith(b'"x": ') else b', "q": '), 1
                )
            seen["cases"] += 1
            scan_all(reader, tests, buffers, mutated + b", " + enc(LAUNCH), seen)
    print(seen, f"{time.time() - t:.1f}s", flush=True)


if __name__ == "__main__":
    main()
