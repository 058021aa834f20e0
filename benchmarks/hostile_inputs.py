"""Hostile traces made by hand from a real one, each given to `kernelscope analyze` in a process of its own.

The cases: JSON nested 100,000 deep (the whole document, inside an event's args, left open); a gzip trailer that
claims 2 GiB or 4 GiB; a .json.gz of 10,000 tiny members, and one followed by 10,000 empty members; numbers in ts,
dur, pid and tid of a kernel (1e400, -1e400, 1e-400, -0, NaN, 30 digits, 2^63 - 1, 2^63, -2^63 - 1) and a
correlation of 1e400; keys given twice (in an event, a kernel's ts and dur, the trace object's traceEvents, args);
bytes that are not UTF-8, a raw and an escaped lone surrogate (in a name, a key, a string pid); a name of 100 MB,
raw and as 16 million \\u escapes; 1, 3 and 10 million empty objects in traceEvents; blanks before and after the
JSON, inside and after a gzip member, and garbage after them. Every case must end with exit 0, or exit 2 and one
line `kernelscope: error: <file>: …`, and no traceback.

    python benchmarks/hostile_inputs.py [--only SUBSTRING] [--timeout 300] [--keep DIR]

Prints one line per case: name, exit status, wall seconds, peak RSS (MiB), the last line of stderr; then the count
of cases that broke the rule (exit 1 if any).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "sample_traces" / "plain_kineto" / "misc.json.gz"
NUMBERS = {"1e400": "1e400", "neg1e400": "-1e400", "1e-400": "1e-400", "neg0": "-0", "nan": "NaN",
           "digits30": "123456789012345678901234567890", "i64max": "9223372036854775807",
           "i64over": "9223372036854775808", "i64under": "-9223372036854775809"}  # fmt: skip


def cases(text: bytes) -> dict[str, Callable[[], bytes]]:
    """name -> what makes the bytes of the file (a name ending in .gz is written so)."""
    doc = json.loads(text)
    events = doc["traceEvents"]
    k = next(i for i, e in enumerate(events) if e.get("cat") == "kernel")
    kernel = json.dumps(events[k]).encode()
    compact = json.dumps(doc).encode()
    head, tail = compact.split(b'"traceEvents": [', 1)
    head += b'"traceEvents": ['

    def kernel_with(old: bytes, new: bytes) -> bytes:
        return compact.replace(kernel, kernel.replace(old, new, 1), 1)

    made = {  # each made when its turn comes: the parent's memory is what its children start from (their peak RSS)
        "nest_document.json": lambda: b"[" * 100_000 + b"]" * 100_000,
        "nest_in_args.json": lambda: head + b'{"ph": "i", "args": {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}},"
        + tail,
        "nest_left_open.json": lambda: head + b'{"args": ' + b"[" * 100_000 + tail,
        "members_10k.json.gz": lambda: b"".join(gzip.compress(text[i : i + 1 + len(text) // 10_000], 1)
                                        for i in range(0, len(text), 1 + len(text) // 10_000)),  # fmt: skip
        "members_empty_10k.json.gz": lambda: gzip.compress(text) + gzip.compress(b"") * 10_000,
        "correlation_1e400.json": lambda: kernel_with(b'"correlation": ', b'"correlation": 1e400, "x": '),
        "twice_in_event.json": lambda: compact.replace(b'"ph": "X"', b'"ph": "X", "ph": "i"', 1),
        "twice_ts_dur.json": lambda: compact.replace(kernel, kernel[:-1] + b', "ts": 0, "dur": -5}', 1),
        "twice_trace_events.json": lambda: compact[:-1] + b', "traceEvents": []}',
        "twice_in_args.json": lambda: kernel_with(b'"args": {', b'"args": {"correlation": 1, '),
        "not_utf8.json": lambda: kernel_with(b'"name": "', b'"name": "\xff\xfe\xc3'),
        "surrogate_raw.json": lambda: kernel_with(b'"name": "', b'"name": "\xed\xa0\x80'),
        "surrogate_escaped.json": lambda: kernel_with(b'"name": "', b'"name": "\\ud800\\udfff\\udc00'),
        "surrogate_in_key.json": lambda: kernel_with(b'"name": "', b'"\\ud800": 1, "name": "'),
        "surrogate_pid.json": lambda: kernel_with(b'"pid": ', b'"pid": "\\ud800", "x": '),
        "name_100mb.json": lambda: kernel_with(b'"name": "', b'"name": "' + b"a" * (100 << 20)),
        "name_16m_escapes.json": lambda: kernel_with(b'"name": "', b'"name": "' + b"\\u00e9" * (16 << 20)),
        "blanks_around.json": lambda: b" \r\n" * (1 << 20) + text + b" \t\r\n\0" * (1 << 20),
        "blanks_around.json.gz": lambda: gzip.compress(text + b"\n" * (3 << 20)) + b"\0\n " * (1 << 20),
        "garbage_after_blanks.json": lambda: text + b" " * (3 << 20) + b"x",
        "garbage_after_blanks_member.json.gz": lambda: gzip.compress(text) + b"\n" * (3 << 20) + b"x",
    }
    for size in (1, 3, 10):
        made[f"empty_objects_{size}m.json"] = lambda size=size: head + b"{}," * (size * 1_000_000) + tail
    for field in ("ts", "dur", "pid", "tid"):
        for tag, number in NUMBERS.items():
            made[f"{field}_{tag}.json"] = lambda f=field, n=number: compact.replace(kernel, _with(kernel, f, n), 1)
    for tag, claimed in (("2gib", 2**31), ("4gib", 2**32 - 1)):  # the trailer's ISIZE: what the member decompresses to
        made[f"isize_{tag}.json.gz"] = lambda c=claimed: gzip.compress(text)[:-4] + struct.pack("<I", c)
    return made


def _with(kernel: bytes, field: str, number: str) -> bytes:
    event = json.loads(kernel)
    event[field] = "__NUMBER__"
    return json.dumps(event).encode().replace(b'"__NUMBER__"', number.encode())


def run(path: Path, timeout: float) -> tuple[int | str, float, float, str, bool]:
    """(exit status or 'timeout', wall s, the child's peak RSS in MiB, stderr's last line, whether stderr keeps the
    rule)."""
    command = [str(Path(sys.executable).with_name("kernelscope")), "analyze", str(path)]
    with tempfile.TemporaryFile("w+") as stderr:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
        while (waited := os.wait4(child.pid, os.WNOHANG))[0] == 0:
            if time.perf_counter() - start > timeout:
                child.kill()
                os.wait4(child.pid, 0)
                return "timeout", time.perf_counter() - start, 0.0, "", False
            time.sleep(0.02)
        wall = time.perf_counter() - start
        child.returncode = code = os.waitstatus_to_exitcode(waited[1])
        stderr.seek(0)
        text = stderr.read()
    lines = [line for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("kernelscope: error: ")]
    right = "Traceback" not in text and (
        (code == 0 and not errors) or (code == 2 and len(errors) == 1 and lines[-1] == errors[0])
    )
    return code, wall, waited[2].ru_maxrss / 1024, lines[-1] if lines else "", right


def main() -> int:
    parser = argparse.ArgumentParser(description="Hostile traces made by hand, each loaded by kernelscope analyze.")
    parser.add_argument("--only", default="", help="run the cases whose name holds this")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per case")
    parser.add_argument("--keep", type=Path, help="write the cases here (kept) instead of a temporary folder")
    parser.add_argument("--write", nargs=2, metavar=("CASE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    text = gzip.decompress(SOURCE.read_bytes())
    if args.write:  # in a process of its own: a child forked from one that held a case starts from its peak RSS
        Path(args.write[1]).write_bytes(cases(text)[args.write[0]]())
        return 0
    broken = 0
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        for name in cases(text):
            if args.only not in name:
                continue
            path = folder / name
            subprocess.run([sys.executable, __file__, "--write", name, str(path)], check=True)
            code, wall, peak, last, right = run(path, args.timeout)
            broken += not right
            print(f"{name:36} {code!s:>7} {wall:6.2f} s {peak:7.0f} MiB {'ok ' if right else 'BAD'} {last[:200]}")
            if args.keep is None:
                path.unlink()
    print(f"\n{broken} case(s) broke the rule (exit 0, or exit 2 and one line of error; no traceback)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
