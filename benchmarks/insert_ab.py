"""A/B of the native reader's insert (ingest_scanned.sql against another text of it), in one process: a part of a
trace is scanned, then inserted into an empty ``events`` by each text in turn, A, B, A again (the A/A control),
for many rounds; the insert's CPU on the calling thread (one DuckDB thread) and its ratio to A's, and whether
every text gave the same rows.

    python benchmarks/insert_ab.py TRACE.json --part-mb 32 --rounds 15 --other OLD_ingest_scanned.sql

The part is the trace's first ``--part-mb`` MB of events, cut between two events as ingest.py cuts; B is the
package's own ingest_scanned.sql, A the ``--other`` file (an older text: ``git show REV:analyzer/ingest_scanned.sql``).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

import duckdb
from kernelscope.analyzer import ingest
from kernelscope.analyzer.sql import run_sql_file, sql_text
from kernelscope.analyzer.trace_parts import BOUNDARY


def first_part(trace: Path, megabytes: int) -> bytes:
    """The events (bare: ``{…},{…}``) of the first ``megabytes`` MB of a plain trace's traceEvents."""
    with open(trace, "rb") as raw:
        data = raw.read(megabytes << 20)
    start = data.index(b"[", data.index(b'"traceEvents"')) + 1
    last = None
    for last in BOUNDARY.finditer(data, start):
        pass
    return data[start : last.start() + 1] if last is not None else data[start:]


def insert_cpu(con: duckdb.DuckDBPyConnection, text: str, part: bytes) -> float:
    """Thread CPU seconds of inserting ``part``, scanned beforehand, by ``text`` into an emptied ``events``."""
    run_sql_file(con, "events.sql")
    scanned = ingest.native_reader.scan(part, 0, True)
    start = time.thread_time()
    con.register("scanned_part", ingest._ArrowStream(scanned[1]))
    con.execute(text)
    con.unregister("scanned_part")
    return time.thread_time() - start


def ab_arguments(doc: str, other: str) -> tuple[argparse.Namespace, bytes]:
    """The command line of an A/B of one part (the trace, --part-mb, --rounds, --other: ``other``), and the part."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--part-mb", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--other", type=Path, required=True, help=other)
    args = parser.parse_args()
    return args, first_part(args.trace, args.part_mb)


def main() -> None:
    args, part = ab_arguments(__doc__, "the A text of ingest_scanned.sql")
    literals = {"first_id": "0", "rank": "0"}
    texts = {
        "A": re.sub(r"\$\{(\w+)\}", lambda m: literals[m[1]], args.other.read_text()),
        "B": re.sub(r"\$\{(\w+)\}", lambda m: literals[m[1]], sql_text("ingest_scanned.sql")),
    }
    texts["A2"] = texts["A"]
    con = duckdb.connect(config={"threads": 1})
    times: dict[str, list[float]] = {name: [] for name in texts}
    rows = {}
    for _ in range(args.rounds):
        for name, text in texts.items():
            times[name].append(insert_cpu(con, text, part))
            rows.setdefault(name, con.execute("SELECT * FROM events ORDER BY event_id").fetchall())
    print(f"part: {len(part):,} bytes, {len(rows['A']):,} events; rows the same: {rows['A'] == rows['B']}")
    print_medians("insert", times)


def print_medians(what: str, times: dict[str, list[float]]) -> None:
    """Each name's median and least CPU of ``what``, and its median's ratio to A's."""
    base = statistics.median(times["A"])
    for name, seconds in times.items():
        median = statistics.median(seconds)
        low = min(seconds)
        print(f"{name:3s} {what} CPU median {median * 1e3:7.2f} ms  min {low * 1e3:7.2f} ms  {median / base:.3f}x A")


if __name__ == "__main__":
    main()
