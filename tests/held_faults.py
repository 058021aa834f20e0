"""_held.hold with each of its allocations failing in turn: a build of _held.c with alloc_faults.h ahead of it (its
malloc, realloc, mmap and mremap fail at the call told, and its blocks and maps are counted), under the sanitizers.
Every failure must raise MemoryError, free every block and map the call made (none freed twice), and leave the
module whole: the next call gives the right rows. The inputs are held_fuzz.py's random rows, and spans nested
200,000 deep: with pages.h's PAGES_MAPPED_FROM at 64 KiB their columns grow on malloc's heap, move into a map and
grow there by mremap, and the sweep's stack grows by realloc.

    python tests/held_faults.py MODULE_PATH

MODULE_PATH: the build (tests/test_held.py makes it: sanitized.py's, with -include alloc_faults.h and
-DPAGES_MAPPED_FROM=65536).
"""

from __future__ import annotations

import ctypes
import random
import sys

import duckdb
from held_fuzz import COLUMNS, FRAME, FUNCTION, MODULE, NAMESPACED, OP, expected, load, random_rows, swept, values

DEPTH = 200_000
NESTED = (
    f"SELECT [{MODULE}, {FUNCTION}, {OP}, {OP | NAMESPACED}, {MODULE | FRAME}][i % 5 + 1], 1, 1, i,"
    f" {10 * DEPTH} - i, i, -1, 0 FROM range({DEPTH}) t(i)"
)
POINTS_INSIDE = f"SELECT 32, 1, 1, {DEPTH - 1} + i, {DEPTH} + i, {10 * DEPTH} + i, -1, 0 FROM range(3) t(i)"


def each_failure(module, faults, con: duckdb.DuckDBPyConnection, right: dict) -> int:
    """hold with its 1st, 2nd, … allocation failing, each call against the rule above; the number of allocations."""
    faults.faults_plan(0)
    assert swept(module, con) == right
    calls = faults.faults_made()
    assert faults.faults_held() == 0, "blocks or maps left by a call that succeeded"
    for fail_at in range(1, calls + 1):
        faults.faults_plan(fail_at)
        try:
            swept(module, con)
        except MemoryError:
            pass
        else:
            raise AssertionError(f"allocation {fail_at} of {calls} failed, and no MemoryError")
        assert faults.faults_held() == 0, f"allocation {fail_at} of {calls} failed: blocks or maps left"
    faults.faults_plan(0)
    assert swept(module, con) == right
    return calls


def main(path: str) -> None:
    module = load(path)
    faults = ctypes.CDLL(path)  # the same library, already loaded: its counters
    faults.faults_made.restype = faults.faults_held.restype = ctypes.c_long
    rng = random.Random(18)
    con = duckdb.connect()
    calls = []
    for n in (0, 1, 40, 400):
        rows = random_rows(rng, n, [(1, 1), (1, 2), (2, 1)])
        con.execute(f"CREATE OR REPLACE TABLE r ({COLUMNS})")
        if rows:
            con.execute(f"INSERT INTO r VALUES {values(rows)}")
        calls.append(each_failure(module, faults, con, expected(rows)))
    con.execute(f"CREATE OR REPLACE TABLE r ({COLUMNS})")
    con.execute(f"INSERT INTO r {NESTED} UNION ALL {POINTS_INSIDE}")
    rows = con.sql("FROM r").fetchall()
    calls.append(each_failure(module, faults, con, expected(rows)))
    print(f"allocations failed in turn: {calls}; each a MemoryError, nothing left")


if __name__ == "__main__":
    main(sys.argv[1])
