"""_held.hold against the rule it implements, read literally (held_by_sql.sql's range join, in Python): random spans
and points of a few threads, fed as DuckDB's Arrow stream as held.py feeds it, and streams it must refuse.

    python tests/held_fuzz.py MODULE_PATH ROUNDS

MODULE_PATH: the built _held extension (test_held.py builds one with sanitizers and runs this against it).
"""

from __future__ import annotations

import importlib.util
import random
import struct
import sys

import duckdb

MODULE, FUNCTION, OP, NAMESPACED, FRAME, POINT = 1, 2, 4, 8, 16, 32
COLUMNS = (
    "flags UTINYINT, pid BIGINT, tid BIGINT, ts_ns BIGINT, end_ns BIGINT, id BIGINT, op_id BIGINT, op_end_ns BIGINT"
)


def values(rows: list[tuple]) -> str:
    """``rows`` as one VALUES list: executemany's statement a row took most of the sanitizers' run."""
    return ", ".join("(" + ", ".join("NULL" if v is None else str(int(v)) for v in row) + ")" for row in rows)


def load(path: str):
    spec = importlib.util.spec_from_file_location("_held", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_rows(rng: random.Random, n: int, threads: list[tuple[int, int]], width: int = 50) -> list[tuple]:
    """n rows of random spans and points starting in [0, width)."""
    rows, ids = [], rng.sample(range(10 * n + 10), n)
    for event_id in ids:
        pid, tid = rng.choice(threads)
        ts = rng.randrange(0, width)
        if rng.random() < 0.3:  # a point: an instant, or a CPU operator's span
            if rng.random() < 0.5:
                rows.append((POINT, pid, tid, ts, ts + 1, event_id, -1, 0))
            else:
                dur = rng.randrange(0, 20)
                rows.append((POINT, pid, tid, ts, ts + max(dur, 1), event_id, event_id, ts + dur))
        else:
            flags = rng.choice([MODULE, FUNCTION, MODULE | FUNCTION, OP, OP | NAMESPACED])
            flags |= FRAME if flags & (MODULE | FUNCTION) and rng.random() < 0.5 else 0
            rows.append((flags, pid, tid, ts, ts + rng.randrange(1, 30), event_id, -1, 0))
    for _ in range(n // 5):  # spans identical to another but for the id, and an operator's own span
        flags, pid, tid, ts, end, _, op_id, op_end = rng.choice(rows)
        if flags & POINT and op_id >= 0:
            rows.append((rng.choice([OP, OP | NAMESPACED, MODULE | FRAME]), pid, tid, ts, op_end, op_id, -1, 0))
        elif not flags & POINT:
            rows.append((flags, pid, tid, ts, end, rng.randrange(10 * n + 10, 20 * n + 20), -1, 0))
    rows = list({row[5]: row for row in rows}.values())  # ids are unique
    rng.shuffle(rows)
    return rows


LIMITS = (-(2**63), -(2**63) + 1, -1, 0, 1, 2**62, 2**63 - 2, 2**63 - 1)


def extreme_rows(rng: random.Random, n: int) -> list[tuple]:
    """n rows at int64's limits: starts and ends near both ends and 0 (spans of 0 ns and ends before their starts
    among them, which hold nothing), pids and tids at the limits, ids up to 2^63 - 1. A point ends after its start,
    as held_spans.sql's always do (at_ns + 1 at least, or DuckDB's overflow error)."""
    threads = [(rng.choice(LIMITS), rng.choice(LIMITS)) for _ in range(3)]
    rows = []
    for event_id in rng.sample(range(2**63 - 1), n):
        pid, tid = rng.choice(threads)
        ts = rng.choice(LIMITS[:-1])
        if rng.random() < 0.3:
            end = rng.choice([ts + 1, *[x for x in LIMITS if x > ts]])
            own = rng.random() < 0.5
            op_id, op_end = (event_id, rng.choice([ts, end])) if own else (-1, 0)
            rows.append((POINT, pid, tid, ts, end, event_id, op_id, op_end))
        else:
            flags = rng.choice([MODULE, FUNCTION, MODULE | FUNCTION | FRAME, OP, OP | NAMESPACED])
            rows.append((flags, pid, tid, ts, rng.choice([ts, *LIMITS]), event_id, -1, 0))
    return rows


def _key(span: tuple) -> tuple:
    """A span's place in the nesting order: start, later end first, a frame first, id."""
    return (span[3], -span[4], 0 if span[0] & FRAME else 1, span[5])


def _best(holding: list[tuple], flag: int, pick, above: tuple | None = None) -> tuple | None:
    """The innermost (max) or outermost (min) of the holding spans with ``flag``, of those inside ``above``."""
    found = [s for s in holding if s[0] & flag and (above is None or _key(s) > _key(above))]
    return pick(found, key=_key) if found else None


def expected(rows: list[tuple]) -> dict[int, tuple]:
    """Per point: module, function, inner op, outer op, the outermost op inside the call scope (else module scope),
    and the same of those with a namespace; -1 for none."""
    spans = [r for r in rows if not r[0] & POINT]
    held = {}
    for flags, pid, tid, ts, end, point_id, op_id, op_end in (r for r in rows if r[0] & POINT):
        holding = [
            s
            for s in spans
            if s[1] == pid
            and s[2] == tid
            and s[3] <= ts
            and end <= s[4]
            and (op_id < 0 or s[3] < ts or s[4] > op_end or s[0] & FRAME or s[5] < op_id)
        ]

        module, function = _best(holding, MODULE, max), _best(holding, FUNCTION, max)
        scope = function or module
        picked = [module, function, _best(holding, OP, max), _best(holding, OP, min)]
        picked += [_best(holding, OP, min, scope), _best(holding, NAMESPACED, min, scope)]
        held[point_id] = tuple(-1 if s is None else s[5] for s in picked)
    return held


POINTS = "SELECT pid, tid, ts_ns, end_ns, id, op_id, op_end_ns FROM r WHERE flags & 32 <> 0"
SPANS = "SELECT flags, pid, tid, ts_ns, end_ns, id FROM r WHERE flags & 32 = 0"


def streams(con: duckdb.DuckDBPyConnection, points: str = POINTS, spans: str = SPANS) -> tuple:
    """The points' stream and a callable giving the spans', as held.py passes them."""
    return con.sql(points).__arrow_c_stream__(), lambda: con.sql(spans).__arrow_c_stream__()


def swept(module, con: duckdb.DuckDBPyConnection) -> dict[int, tuple]:
    points, held = module.hold(*streams(con))
    values = struct.unpack(f"<{7 * points}q", held)
    columns = [values[c * points : (c + 1) * points] for c in range(7)]
    return {columns[0][p]: tuple(columns[c][p] for c in range(1, 7)) for p in range(points)}


def refused(module, con: duckdb.DuckDBPyConnection, points: str = POINTS, spans: str = SPANS) -> None:
    try:
        module.hold(*streams(con, points, spans))
    except ValueError:
        return
    raise AssertionError(f"not refused: {points} / {spans}")


def main(path: str, rounds: int) -> None:
    module = load(path)
    rng = random.Random(0)
    con = duckdb.connect()
    for round_ in range(rounds):
        few = [(1, 1), (1, 2), (2, 1)]
        many = [(rng.randrange(-3, 3), rng.randrange(-(2**40), 2**40)) for _ in range(60)]
        # wide: many points a thread, far apart, so the search for the points in a span takes long strides
        n, width = rng.choice([(0, 50), (1, 50), (5, 50), (40, 50), (200, 50), (400, 20000)])
        rows = random_rows(rng, n, rng.choice([few, few, many]), width) if round_ % 4 else extreme_rows(rng, n)
        con.execute(f"CREATE OR REPLACE TABLE r ({COLUMNS})")
        if rows:
            con.execute(f"INSERT INTO r VALUES {values(rows)}")
        assert swept(module, con) == expected(rows), f"round {round_}"
    # several batches of DuckDB's stream, and nested spans deep enough to grow every buffer
    con.execute(f"CREATE OR REPLACE TABLE r ({COLUMNS})")
    con.execute("INSERT INTO r SELECT 1, 1, 1, i, 10000000 - i, i, -1, 0 FROM range(200000) t(i)")
    con.execute("INSERT INTO r SELECT 32, 1, 1, 99999, 100000, 10000000, -1, 0")
    assert swept(module, con) == {10000000: (99999, -1, -1, -1, -1, -1)}
    # thousands of threads, first seen in no order of theirs (the thread numbers' table grows many times)
    con.execute(f"CREATE OR REPLACE TABLE r ({COLUMNS})")
    threads = "(i * 7919) % 13, (i * 104729) % 5003"  # 5003 distinct pairs: 5003 is prime
    con.execute(f"INSERT INTO r SELECT 1, {threads}, 0, 10, i, -1, 0 FROM range(5003) t(i)")
    con.execute(f"INSERT INTO r SELECT 32, {threads}, 5, 6, 10000 + i, -1, 0 FROM range(5003) t(i)")
    assert swept(module, con) == {10000 + i: (i, -1, -1, -1, -1, -1) for i in range(5003)}
    refused(module, con, POINTS.replace("tid,", "CAST(NULL AS BIGINT),"))
    refused(module, con, spans=SPANS.replace("tid,", "CAST(NULL AS BIGINT),"))
    refused(module, con, POINTS.replace("pid,", "CAST(pid AS INTEGER),"))
    refused(module, con, spans=SPANS.replace("pid,", "CAST(pid AS INTEGER),"))
    refused(module, con, "SELECT flags, pid FROM r")
    refused(module, con, spans="SELECT flags, pid FROM r")
    refused(module, con, spans=SPANS.replace("flags & 32 = 0", "true"))  # a point among the spans
    refused(module, con, spans=POINTS)
    print(f"{rounds} rounds and the refusals: as the rule reads")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
