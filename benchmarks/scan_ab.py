"""A/B of the native reader's scan alone (analyzer/_kineto.c, two builds of it), in one process: a part of a trace
is scanned by each build in turn, A, B, A again (the A/A control), for many rounds; the scan's CPU on the calling
thread, its ratio to A's, and whether every build gave the same result (rows, facts and each Arrow column).

    python benchmarks/scan_ab.py TRACE.json --part-mb 32 --rounds 15 --other OLD/_kineto.cpython-311-x86_64-linux-gnu.so

B is the package's own build, A the ``--other`` file (an older build: the .so of another tree). The part is the
trace's first ``--part-mb`` MB of events, cut between two events as ingest.py cuts (insert_ab.py's first_part).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import time
from pathlib import Path

import pyarrow as pa
from insert_ab import ab_arguments, print_medians
from kernelscope.analyzer import ingest


def load_build(path: Path):
    """The extension at ``path`` as a module of its own (not in sys.modules), beside the package's."""
    loader = importlib.machinery.ExtensionFileLoader("kernelscope.analyzer._kineto", str(path))
    spec = importlib.util.spec_from_file_location("kernelscope.analyzer._kineto", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def scan_cpu(build, part: bytes) -> tuple[float, tuple]:
    """Thread CPU seconds of scanning ``part`` (its arrays freed after the timer), and what the scan gave."""
    start = time.thread_time()
    scanned = build.scan(part, 0, True, True)
    seconds = time.thread_time() - start
    return seconds, scanned


def as_rows(scanned: tuple) -> tuple:
    """The scan's result as comparable values: its counts and facts, and the Arrow columns as Python lists."""
    table = pa.RecordBatchReader._import_from_c_capsule(scanned[1]).read_all()
    return (scanned[0], scanned[2], scanned[3], scanned[4], scanned[5], table.to_pydict())


def main() -> None:
    args, part = ab_arguments(__doc__, "the A build of _kineto (a .so)")
    builds = {"A": load_build(args.other), "B": ingest.native_reader}
    builds["A2"] = builds["A"]
    same = as_rows(scan_cpu(builds["A"], part)[1]) == as_rows(scan_cpu(builds["B"], part)[1])
    times: dict[str, list[float]] = {name: [] for name in builds}
    for _ in range(args.rounds):
        for name, build in builds.items():
            times[name].append(scan_cpu(build, part)[0])
    print(f"part: {len(part):,} bytes; results the same: {same}")
    print_medians("scan", times)


if __name__ == "__main__":
    main()
