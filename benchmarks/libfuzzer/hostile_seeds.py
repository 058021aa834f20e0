"""Hand-made hostile seeds for the native reader's libFuzzer harness (fuzz_kineto.c), beside fuzz_kineto.py's parts of
the sample traces: each strategy below writes inputs the mutations alone reach rarely, in the harness's form (first
byte: 1 for bare events, 0 for an array).

    python benchmarks/libfuzzer/hostile_seeds.py DIR     # writes DIR/<strategy>-<n>, prints the counts

Strategies: deep nesting (in args, in fields the reader reads, in keys it skips), huge numbers and exponents in every
number field, UTF-8 edges (overlong forms, raw surrogates, unpaired \\u surrogates, NUL raw and escaped, bytes never
valid), truncation at every byte of a small valid part, keys given twice with values of other kinds, a value of every
kind in every field the reader reads (and in every join key of args), and keys and strings long enough to cross the
harness's and the reader's page-sized steps (4 KiB, 64 KiB).
"""

from __future__ import annotations

import argparse
from pathlib import Path

VALID = (
    b'{"ph":"X","cat":"kernel","name":"void k<1>(float*)","pid":0,"tid":7,"ts":1700000000000.123,"dur":4.5,'
    b'"args":{"correlation":12,"External id":3,"device":0,"stream":7}},'
    b'{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":10,"ts":1699999999999.5,"dur":3,'
    b'"args":{"correlation":12,"External id":3}},'
    b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":10,"tid":10,"ts":1699999999999,"dur":5,'
    b'"args":{"External id":3,"Sequence number":1}},'
    b'{"ph":"s","id":12,"pid":10,"tid":10,"ts":1699999999999.5,"cat":"ac2g","name":"ac2g"},'
    b'{"ph":"M","name":"thread_name","pid":10,"tid":10,"args":{"name":"python"}}'
)
FIELDS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args"]
JOIN_KEYS = ["correlation", "External id", "external id", "device", "stream", "Sequence number", "flow id"]
VALUES = [
    b"null",
    b"true",
    b"false",
    b"0",
    b"-0",
    b"-1",
    b'""',
    b'"x"',
    b'"12"',
    b'"-0"',
    b'"0x1f"',
    b"[]",
    b"{}",
    b"[1,2]",
    b'{"a":1}',
    b"1.5",
    b"-1.5",
    b"1e308",
    b"-1e308",
    b"1e309",
    b"1e-400",
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775808",
    b"-9223372036854775809",
    b"18446744073709551616",
    b"1" + b"0" * 400,
    b"0." + b"0" * 400 + b"1",
    b"1e99999999999999999999",
    b"1e-99999999999999999999",
    b"0e99999999999999999999",
    b"123456789012345678901234567890e-30",
    b"4294967296",
    b"2147483648",
    b"-2147483649",
    b'"\\u0000"',
    b'"\\ud800"',
    b'"' + b"\\u0041" * 10 + b'"',
]
BAD_NUMBERS = [
    b"-",
    b"1.",
    b".5",
    b"1e",
    b"1e+",
    b"01",
    b"+1",
    b"0x10",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e--1",
    b"1.e5",
    b"--1",
    b"1_000",
    b"\xef\xbc\x91",
]
UTF8 = [
    b"\xc0\x80",
    b"\xc1\xbf",
    b"\xe0\x80\x80",
    b"\xf0\x80\x80\x80",
    b"\xed\xa0\x80",
    b"\xed\xbf\xbf",
    b"\xf4\x90\x80\x80",
    b"\xf5\x80\x80\x80",
    b"\xff",
    b"\xfe",
    b"\x80",
    b"\xc3",
    b"\xe2\x82",
    b"\xef\xbb\xbf",
    b"\x00",
    b"\x01",
    b"\x1f",
    b"\x7f",
    b"\\u0000",
    b"\\ud800",
    b"\\udfff",
    b"\\ud800\\u0041",
    b"\\udc00\\ud800",
    b"\\ud83d\\ude00",
    b"\\uDBFF\\uDFFF",
    b"\\u12",
    b"\\u12G4",
    b"\\x41",
    b"\\",
    b"\\U0001F600",
    b"\\u00e9\\u0301",
]


def event(**fields: bytes) -> bytes:
    return b"{" + b",".join(b'"' + k.encode() + b'":' + v for k, v in fields.items()) + b"}"


def base(field_values: dict[str, bytes]) -> bytes:
    fields = {
        "ph": b'"X"',
        "cat": b'"kernel"',
        "name": b'"k"',
        "pid": b"0",
        "tid": b"7",
        "ts": b"1",
        "dur": b"2",
        "args": b'{"correlation":1,"device":0,"stream":7}',
    }
    fields.update(field_values)
    return event(**fields)


def strategies() -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    nests = []
    for depth in (63, 64, 65, 66, 200, 3000):
        nests.append(b'{"args":{"a":' + b"[" * depth + b"]" * depth + b"}}")
        nests.append(b'{"args":{"a":' + b'{"b":' * depth + b"1" + b"}" * depth + b"}}")
        nests.append(b'{"args":{"a":' + b"[" * depth + b"}}")  # never closed
        nests.append(b'{"unknown":' + b"[" * depth + b"]" * depth + b',"ph":"X"}')
        for field in ("name", "pid", "ts", "ph", "id"):
            nests.append(b'{"' + field.encode() + b'":' + b"[" * depth + b"1" + b"]" * depth + b"}")
        nests.append(b"[" * depth)
    out["nest"] = nests
    numbers = []
    for field in ("ts", "dur", "pid", "tid", "id"):
        for value in VALUES + BAD_NUMBERS:
            numbers.append(base({field: value}))
    for key in JOIN_KEYS:
        for value in VALUES + BAD_NUMBERS:
            numbers.append(event(ph=b'"X"', cat=b'"kernel"', args=b'{"' + key.encode() + b'":' + value + b"}"))
    numbers.append(base({"args": b'{"x":' + b"9" * 5000 + b"e-" + b"9" * 5000 + b"}"}))
    numbers.append(base({"ts": b"1." + b"0" * 5000 + b"1"}))
    out["number"] = numbers
    texts = []
    for field in ("ph", "cat", "name"):
        for edge in UTF8:
            texts.append(base({field: b'"a' + edge + b'b"'}))
            texts.append(base({field: b'"' + edge + b'"'}))
    for edge in UTF8:
        texts.append(event(ph=b'"X"', args=b'{"k' + edge + b'":"v' + edge + b'"}'))
        texts.append(b'{"' + edge + b'ph":"X"}')
        texts.append(event(ph=b'"M"', name=b'"thread_name"', pid=b"1", tid=b"1", args=b'{"name":"' + edge + b'"}'))
    out["utf8"] = texts
    out["truncate"] = [VALID[:n] for n in range(len(VALID))] + [b"[" + VALID[:n] for n in range(len(VALID))]
    twice = []
    for field in FIELDS:
        for value in (b"null", b"1", b'"x"', b"[]", b"{}", b"1e400", b'"\\ud800"'):
            twice.append(base({}).replace(b'"ph":', b'"' + field.encode() + b'":' + value + b',"ph":', 1))
            twice.append(base({})[:-1] + b',"' + field.encode() + b'":' + value + b"}")
    for key in JOIN_KEYS:
        twice.append(event(ph=b'"X"', args=b'{"' + key.encode() + b'":1,"' + key.encode() + b'":"x"}'))
        twice.append(event(ph=b'"X"', args=b'{"' + key.encode() + b'":"x","' + key.encode() + b'":2}'))
    out["twice"] = twice
    kinds = []
    for field in FIELDS:
        for value in VALUES:
            kinds.append(base({field: value}))
    for name in (b"process_name", b"thread_name", b"process_labels", b"thread_sort_index", b"process_sort_index"):
        for value in VALUES:
            kinds.append(event(ph=b'"M"', name=b'"' + name + b'"', pid=b"1", tid=b"1", args=b'{"name":' + value + b"}"))
            kinds.append(event(ph=b'"M"', name=b'"' + name + b'"', pid=value, tid=value, args=b'{"name":"x"}'))
    out["kinds"] = kinds
    longs = []
    for n in (4095, 4096, 4097, 8191, 8192, 65535, 65536, 65537, 1 << 20):
        text = b"x" * n
        longs.append(base({"name": b'"' + text + b'"'}))
        longs.append(base({"args": b'{"' + text + b'":1}'}))
        longs.append(b'{"' + text + b'":1,"ph":"X"}')
        longs.append(base({"name": b'"' + b"\\u00e9" * (n // 6) + b'"'}))
        longs.append(base({"args": b'{"a":"' + b"\\n" * (n // 2) + b'"}'}))
        longs.append(base({"args": b'{"a":' + b" " * n + b"1}"}))
    out["long"] = longs
    return out


def write(folder: Path) -> dict[str, int]:
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name, cases in strategies().items():
        for i, case in enumerate(cases):
            (folder / f"{name}-{i}-a").write_bytes(b"\x00[" + case + b"]")
            (folder / f"{name}-{i}-b").write_bytes(b"\x01" + case)
        counts[name] = 2 * len(cases)
    return counts


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="the folder to write the seeds into")
    print(write(parser.parse_args().dir))
