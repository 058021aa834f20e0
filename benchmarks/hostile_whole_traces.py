"""Whole hostile traces through the whole load (ingest_trace: the header, the cuts into parts, gzip members and the
native reader), with the reader built with AddressSanitizer and UBSan and parts made small, so that every cut, member
and page boundary lands somewhere the mutation chose. Beside fuzz_kineto.c (one part, the C alone) and
native_structured_fuzz.py (parts in guarded buffers): what the Python around the reader hands it.

Mutations of a real trace (sample_traces/mlp): the events' separator `},{"` and escapes (`\\"`, `\\\\`, `\\u00e9`)
inside names and args, strings longer than a part, keys twice, events cut anywhere; gzip written as indexed members
(write_members) whose length field, ISIZE or CRC lie, members split inside a string or an escape, members followed
by garbage, zeros or a truncated member, plain gzip concatenated with trailing garbage, and every file truncated.
Each case must load, with the rows DuckDB's own reader gives for it (the native reader off), or be refused by both
with a KernelscopeError; any other exception, a disagreement or a sanitizer report is a finding.

    LD_PRELOAD=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libstdc++.so.6) \\
    ASAN_OPTIONS=detect_leaks=0 PYTHONMALLOC=malloc \\
    python benchmarks/hostile_whole_traces.py ASAN_BUILD.so [--seed N] [--seconds S]

ASAN_BUILD.so: _kineto.c built as tests/sanitized.py builds it (with -DPAGES_MAPPED_FROM="((size_t)-1)").
"""

from __future__ import annotations

import argparse
import gzip
import io
import random
import struct
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import native_fuzz  # noqa: E402

SOURCE = REPO / "sample_traces" / "mlp" / "trace.json.gz"
INSIDE = [b'},{"', b'}, {"ph":"X","name":"', b'\\"},{\\"', b"\\\\", b"\\u00e9", b"\\ud800", b'\\"', b"}]}", b"\\"]


def _string_positions(text: bytes, rng: random.Random) -> int:
    """A position just inside a string value (after `"name":"`, `"args":{"`)."""
    for _ in range(50):
        at = text.find(rng.choice([b'"name":"', b'"cat":"', b'"args":{"']), rng.randrange(len(text)))
        if at >= 0:
            return text.index(b'"', at + 6) + 1 + (1 if text[at + 1 : at + 5] == b"args" else 0)
    return len(text) // 2


def json_mutation(text: bytes, rng: random.Random) -> tuple[str, bytes]:
    kind = rng.choice(["inside", "inside", "long", "twice", "cut", "bytes"])
    if kind == "inside":
        out = text
        for _ in range(rng.randrange(1, 30)):
            at = _string_positions(out, rng)
            out = out[:at] + rng.choice(INSIDE) + out[at:]
        return kind, out
    if kind == "long":
        at = _string_positions(text, rng)
        piece = rng.choice([b"x", b"\\n", b"\\u0041", b'},{"', b"\\\\"]) * rng.choice([4096, 16385, 65537])
        return kind, text[:at] + piece + text[at:]
    if kind == "twice":
        key = rng.choice([b'"ph":', b'"ts":', b'"dur":', b'"name":', b'"args":', b'"pid":', b'"correlation":'])
        value = rng.choice([b'"X",', b"1,", b"null,", b"[],", b"{},", b"1e400,", b'"\\u0000",'])
        out, at = text, 0
        for _ in range(rng.randrange(1, 20)):
            at = out.find(key, rng.randrange(len(out)))
            if at > 0:
                out = out[:at] + key + value + out[at:]
        return kind, out
    if kind == "cut":
        at = rng.randrange(len(text))
        return kind, text[:at] + text[rng.randrange(at, len(text)) :]
    out = bytearray(text)
    for _ in range(rng.randrange(1, 20)):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return kind, bytes(out)


def _members(text: bytes, rng: random.Random) -> list[bytes]:
    from kernelscope.analyzer.gzip_members import write_members

    out = io.BytesIO()
    write_members(io.BytesIO(text), out, 1, rng.choice([500, 2000, 4096, 10_000]))
    data, members, at = out.getvalue(), [], 0
    while at < len(data):
        length = int.from_bytes(data[at + 16 : at + 20], "little")
        members.append(data[at : at + length])
        at += length
    return members


def gzip_mutation(text: bytes, rng: random.Random) -> tuple[str, bytes]:
    kind = rng.choice(["length", "isize", "crc", "garbage", "plain_garbage", "truncated", "empty", "swap"])
    if kind == "plain_garbage":
        tail = rng.choice([b"\0" * rng.randrange(1, 5000), bytes(rng.randrange(256) for _ in range(9)), b"\x1f\x8b"])
        return kind, gzip.compress(text, 1) + tail + rng.choice([b"", gzip.compress(b"]}", 1)])
    members = _members(text, rng)
    i = rng.randrange(len(members))
    member = bytearray(members[i])
    if kind == "length":
        struct.pack_into("<I", member, 16, max(0, len(member) + rng.choice([-1, 1, -8, 8, -len(member), 1 << 30])))
    elif kind == "isize":
        held = struct.unpack_from("<I", member, len(member) - 4)[0]
        struct.pack_into("<I", member, len(member) - 4, rng.choice([0, 1, held - 1, held + 1, 0xFFFFFFFF]) % (1 << 32))
    elif kind == "crc":
        struct.pack_into("<I", member, len(member) - 8, rng.randrange(1 << 32))
    elif kind == "garbage":
        members.append(rng.choice([b"\0" * 4096, b"garbage", b"\x1f\x8b\x08\x04", members[-1][: rng.randrange(30)]]))
    elif kind == "truncated":
        member = member[: rng.randrange(len(member))]
    elif kind == "empty":
        members.insert(i, bytes(_members(b"", rng)[0]) if _members(b"", rng) else gzip.compress(b""))
    elif kind == "swap" and len(members) > 1:
        j = rng.randrange(len(members))
        members[i], members[j] = members[j], members[i]
    if kind not in ("garbage", "empty", "swap"):
        members[i] = bytes(member)
    return kind, b"".join(members)


def events(con) -> list[tuple]:
    return con.execute("SELECT * EXCLUDE (event_id) FROM events ORDER BY ALL").fetchall()


def load(path: Path, native) -> tuple[str, object]:
    import duckdb
    from kernelscope.analyzer import ingest
    from kernelscope.analyzer.errors import KernelscopeError

    ingest.native_reader = native
    con = duckdb.connect()
    try:
        ingest.ingest_trace(con, path)
        return "loaded", events(con)
    except KernelscopeError as exc:
        return "refused", str(exc)
    except MemoryError:
        return "refused", "memory"
    except Exception:  # noqa: BLE001 - any other is the finding this looks for
        return "crashed", traceback.format_exc()
    finally:
        con.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="the sanitizer build of _kineto.c")
    parser.add_argument("--seed", type=int, default=2112)
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--part-bytes", type=int, default=4 << 10)
    options = parser.parse_args()
    reader = native_fuzz._load_reader(options.module)
    from kernelscope.analyzer import ingest

    for name in ("STREAM_PART_BYTES", "MAX_PART_BYTES", "MIN_PART_BYTES", "MIN_FLIGHT_PART_BYTES"):
        setattr(ingest, name, options.part_bytes)
    rng = random.Random(options.seed)
    text = gzip.decompress(SOURCE.read_bytes())
    counts: dict[str, int] = {}
    findings = 0
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        case = 0
        while time.monotonic() - start < options.seconds:
            case += 1
            kind, data = json_mutation(text, rng) if rng.random() < 0.6 else ("json", text)
            if rng.random() < 0.5:
                how, data = gzip_mutation(data, rng)
                name = "trace.json.gz"
            else:
                how, name = "plain", "trace.json"
                if rng.random() < 0.2:
                    data = data[: rng.randrange(len(data))]
            path = Path(scratch) / name
            path.write_bytes(data)
            native = load(path, reader)
            duck = load(path, None)
            verdict = f"{native[0]}/{duck[0]}"
            counts[verdict] = counts.get(verdict, 0) + 1
            bad = "crashed" in verdict or (native[0] == duck[0] == "loaded" and native[1] != duck[1])
            if bad:
                findings += 1
                keep = Path(scratch).parent / f"hostile_whole_{options.seed}_{case}_{name}"
                keep.write_bytes(data)
                print(f"FINDING case {case} {kind}+{how}: {verdict}, kept as {keep}", flush=True)
                for side in (native, duck):
                    if side[0] == "crashed":
                        print(side[1], flush=True)
    print(f"{case} cases in {time.monotonic() - start:.0f} s, seed {options.seed}: {counts}; findings {findings}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
