"""Structure-aware mutations of a part of three events (an operator, its launch, its kernel), scanned by the
native reader (analyzer/_kineto.c) in guarded buffers, bare and as an array, with and without the repeats check;
every seventh part read is inserted into DuckDB from its Arrow stream. Beside tests/native_fuzz.py's random
splices: the part cut at every byte (both halves); each field and join key of each event set to a number at the
limits (2^63 and past it, 1e309, 4.9e-324, 400 digits, ts*1000 past 2^63), a string (1 MiB, 50,000 escaped NULs,
lone and paired surrogates, escapes cut short, bytes not UTF-8), nesting 100,000 deep; each also cut at a random
byte and written as a second, duplicate key; long strings and deep nesting as a name, an args value and an args key.
Then parts of launches of several runtimes (cuda_runtime and cuda_driver, xpu_, musa_, mtia_, privateuse1_…, the
device-agnostic runtime and driver, names that only end like one, escaped) with kernel and graph launch names, their
device events (kernel, <device>_kernel, mtia_ccp_events) and correlations shared across runtimes and within one: each
scanned as above, and its rows, its count of the events validate.sql refuses and its repeats answer compared with
DuckDB's reader, validate.sql and validate_repeats.sql.

    python benchmarks/native_structured_fuzz.py MODULE.so [--seed N] [--runtime-parts N]

MODULE.so: a build of _kineto.c, with AddressSanitizer and UBSan as test_native_reader.py's sanitizer test makes it
(gcc -shared -fPIC -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all), run with libasan and libstdc++
preloaded and PYTHONMALLOC=malloc; a sanitizer report aborts the run. Prints the counts of parts read and left to
DuckDB.
"""

import argparse
import json
import random
import sys
import tempfile
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


RUNTIME_CATEGORIES = [
    "cuda_runtime", "cuda_driver", "xpu_runtime", "xpu_driver", "musa_runtime", "musa_driver", "mtia_runtime",
    "privateuse1_runtime", "privateuse1_driver", "mlu_runtime", "runtime", "driver", "_runtime", "_driver",
    "runtime_runtime", "cuda_runtime_driver", "cuda_runtim", "Runtime", "",
]  # fmt: skip
ESCAPED = ["cuda\\u005fruntime", "xpu\\u005fdriver", "\\u00e9_runtime", "cuda_runtime\\u0000", "mtia\\u005fccp_events"]
DEVICE_CATEGORIES = [
    "kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events", "mtia_ccp_event", "mtia_insight", "xpu_kernel",
    "musa_kernel", "_kernel", "mlu_memcpy", "memset", "Kernel",
]  # fmt: skip
LAUNCH_NAMES = [
    "cudaLaunchKernel", "cuLaunchKernelEx", "musaLaunchKernel", "urEnqueueKernelLaunch", "cnInvokeKernel",
    "zeCommandListAppendLaunchKernel", "cudaGraphLaunch", "musaGraphLaunch_ptsz", "cudaLaunchHostFunc",
    "cudaStreamBeginCapture", "cudaStreamEndCapture", "Kernel", "Launch", "GraphLaunch", "",
]  # fmt: skip


def runtime_part(rng: random.Random) -> bytes:
    """Launches of several runtimes, their device events and operators, of few correlations and External ids (so
    that runtimes share them, and one runtime repeats them), some fields null or missing."""

    def pick(values, null=0.05):
        return None if rng.random() < null else rng.choice(values)

    def category(values):  # an escaped one (which the reader leaves to DuckDB) now and then
        return pick(ESCAPED if rng.random() < 0.02 else values)

    events = []
    for _ in range(rng.randrange(1, 9)):
        kind = rng.random()
        if kind < 0.5:
            cat, name = category(RUNTIME_CATEGORIES), pick(LAUNCH_NAMES)
            args = {"correlation": pick([1, 2, 3] * 20 + ['"2"']), "External id": pick([10, 11], 0.4)}
        elif kind < 0.9:
            cat, name = category(DEVICE_CATEGORIES), pick(["k", "Memcpy HtoD", "ccp"])
            args = {"correlation": pick([1, 2, 3], 0.2), "External id": pick([10, 11], 0.4), "device": pick([0, 1]),
                    "stream": pick([7, 8])}  # fmt: skip
        else:
            cat, name, args = pick(["cpu_op", "user_annotation"]), "aten::mm", {"External id": pick([10, 11])}
        fields = {"ph": pick(['"X"', '"X"', '"X"', '"B"', '"i"']), "cat": None if cat is None else f'"{cat}"',
                  "name": None if name is None else f'"{name}"', "pid": pick([1, 2]), "tid": pick([1, 2]),
                  "ts": pick([1, 2, 3]), "dur": pick([1, 0, -1])}  # fmt: skip
        members = [f'"{k}": {v}' for k, v in fields.items() if v is not None]
        members.append('"args": {' + ", ".join(f'"{k}": {v}' for k, v in args.items() if v is not None) + "}")
        events.append("{" + ", ".join(members) + "}")
        if rng.random() < 0.15:
            events.append(events[rng.randrange(len(events))])  # a repeat as it is
    return ", ".join(events).encode()


def check_runtime_part(reader, tests, part: bytes, scratch: Path) -> bool:
    """The part's rows as DuckDB reads them, whether validate.sql refuses one of them by its rules 1-7 (a count of
    none lets it skip them; an unpaired "B" event is counted) and validate_repeats.sql's answer, from the native
    reader; whether the reader read it (else it left it to DuckDB)."""
    from kernelscope.analyzer.sql import define_scope_names, sql_text

    array = b"[" + part + b"]"
    scanned = reader.scan(array, 7 << 40, False, True)
    if scanned[0] is None:
        return False
    con = tests._inserted(scanned[1])
    rows = con.execute("SELECT * FROM events ORDER BY event_id").fetchall()
    assert rows == tests._read_with_duckdb(array, scratch), part
    define_scope_names(con, "ks.module:", "ks.fn:")
    assert scanned[3] is con.execute(sql_text("validate_repeats.sql")).fetchone()[0], part
    con.execute("SET VARIABLE ks_rows_checked = false")
    refused = con.execute(sql_text("validate.sql")).fetchone()
    spans = any(row[1] == "B" for row in rows)  # counted as broken until paired_spans.sql pairs them
    assert ((refused is not None and refused[0] <= 7) or spans) == (scanned[2] > 0), part
    return True


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
    parser.add_argument("--runtime-parts", type=int, default=2000, help="parts of launches of several runtimes")
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
    seen["runtime parts"] = seen["runtime parts compared"] = 0
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(args.runtime_parts):
            part = runtime_part(rng)
            seen["runtime parts"] += 1
            scan_all(reader, tests, buffers, part, seen)
            scan_all(reader, tests, buffers, part[: rng.randrange(len(part) + 1)], seen)
            seen["runtime parts compared"] += check_runtime_part(reader, tests, part, Path(scratch))
    print(seen, f"{time.time() - t:.1f}s", flush=True)


if __name__ == "__main__":
    main()
