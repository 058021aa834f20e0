"""An archive of thousands of runs: how adding, listing, one run's tables and a cross-run query grow with it.

    python benchmarks/archive_scale.py [--sizes 100,1000,10000] [--repeat 3] [--keep DIR]

Builds one archive and grows it to each size in turn. Its first runs are real adds of sample runs (demo, mlp,
resnet50, and a job whose ranks are demo and threads); the rest are synthetic copies of those, written straight
into the archive's layout (each table's rows of a template run under a new run id, with its own name and a
`team` tag out of five), since re-ingesting 10,000 traces would take hours and measure nothing new. At each
size it times, median of ``--repeat`` (each on a freshly opened archive, as a new `kernelscope` process sees
it):

- add: one more real add (a tagged copy of sample_traces/demo: a run id the archive lacks);
- runs: ``Archive.runs()``, what `kernelscope runs` prints;
- run(ID): ``Archive.run(ID)`` and its summary, what `kernelscope analyze ARCHIVE --run ID` prints;
- query: the time per run of the runs tagged team=infra (docs/sql.md's second example), opened and run;

and prints one line per size with those medians and the archive's size on disk (and how long writing the
synthetic runs and then the runs index took: the adds would have written it every 64 runs), then each one's
ratio from the smallest size to the largest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
from kernelscope.analyzer.archive import Archive
from kernelscope.analyzer.archive_commit import TABLES, committed_parts
from kernelscope.analyzer.archive_index import refresh_index

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_traces"
sys.path.insert(0, str(REPO / "tests"))
from conftest import make_job, tagged_copy  # noqa: E402  (a job, a tagged run: made as the tests make them)

TEAMS = ("infra", "research", "serving", "vision", "training")
CROSS_RUN = (
    "SELECT r.name, sum(k.kernel_us) AS us FROM kernels k JOIN runs r USING (run_id, rank) "
    "WHERE k.function_name = 'linear' AND r.tags->>'team' = 'infra' GROUP BY ALL"
)
SYNTHETIC_TOKEN = "0.0.000000000000.5ca1e000"  # a dead add's token: no process owns it
BATCH = 500  # synthetic runs written per statement: bounds the memory of one COPY


def synthetic_id(index: int) -> str:
    return "run-" + hashlib.sha256(f"synthetic-{index}".encode()).hexdigest()[:12]


def grow(archive: Path, templates: list[str], start: int, stop: int) -> None:
    """Write the synthetic runs ``start`` to ``stop - 1``: each one a template run's rows under a new id."""
    store = Archive(archive)
    con = duckdb.connect()
    for table in TABLES:  # the template runs' rows, as the archive's views read them
        con.execute(
            f"CREATE TABLE template_{table} AS SELECT * FROM ({store._read(store_parts(store, templates), table)})"
        )
    for first in range(start, stop, BATCH):
        batch = [
            (synthetic_id(i), templates[i % len(templates)], f"synthetic-{i}", json.dumps({"team": TEAMS[i % 5]}))
            for i in range(first, min(first + BATCH, stop))
        ]
        con.execute("CREATE OR REPLACE TABLE made (run_id VARCHAR, template VARCHAR, name VARCHAR, tags JSON)")
        con.executemany("INSERT INTO made VALUES (?, ?, ?, ?)", batch)
        for table in TABLES:
            replace = " REPLACE (m.name AS name, m.tags AS tags)" if table == "runs" else ""
            # a runs row that counts its events says its files name their part (archive_verify.py), which one
            # COPY of many partitions cannot write: the copies' rows are counted as an older kernelscope counted
            uncounted = ", events, samples" if table == "runs" else ""
            con.execute(
                f"COPY (SELECT m.run_id, t.rank, t.* EXCLUDE (run_id, rank{uncounted}){replace} FROM made m "
                f"JOIN template_{table} t ON t.run_id = m.template) TO '{archive / table}' (FORMAT parquet, "
                f"PARTITION_BY (run_id, rank), FILENAME_PATTERN 'part-{SYNTHETIC_TOKEN}', OVERWRITE_OR_IGNORE)"
            )
    con.close()


def store_parts(store: Archive, run_ids: list[str]):
    return [part for run_id in run_ids for part in committed_parts(store.root, run_id)]


def median_time(action, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in folder.rglob("*") if p.is_file())


def measure(archive: Path, work: Path, size: int, repeat: int, one_run: str) -> dict:
    added = iter(range(10**6))

    def add() -> None:
        index = next(added)
        source = tagged_copy(
            SAMPLES / "demo", work / f"add-{size}-{index}", {"team": "infra", "add": f"{size}-{index}"}
        )
        assert Archive(archive).add(source)[1]

    def one_run_tables() -> None:
        with Archive(archive).run(one_run) as run:
            run.sql("SELECT * FROM summary")

    def query() -> None:
        with Archive(archive) as store:
            assert len(store.sql(CROSS_RUN))

    def listing() -> None:
        with Archive(archive) as store:
            assert len(store.runs()) >= size

    return {
        "add": median_time(add, repeat),
        "runs": median_time(listing, repeat),
        "run(ID)": median_time(one_run_tables, repeat),
        "query": median_time(query, repeat),
        "MB": disk_bytes(archive) / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build the archive here and leave it (default: a temporary folder)")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        archive = (args.keep or work) / "archive"
        archive.parent.mkdir(parents=True, exist_ok=True)
        job = make_job(work / "job", {0: SAMPLES / "demo", 1: SAMPLES / "threads"})
        sources = [SAMPLES / "demo", SAMPLES / "mlp", SAMPLES / "resnet50", job]
        store = Archive(archive, create=True)
        templates = [store.add(source)[0] for source in sources]
        count, results = len(templates), {}
        for size in sizes:
            start = time.perf_counter()
            grow(archive, templates, count, size)
            count = max(count, size)
            built = time.perf_counter() - start
            start = time.perf_counter()
            refresh_index(archive, lambda parts: store._read(parts, "runs"))  # as the adds would have, every 64
            indexed = time.perf_counter() - start
            os.sync()  # else the first add's fsync waits for the writeback of what was just written
            results[size] = measure(archive, work, size, args.repeat, templates[-1])
            count += args.repeat  # the adds measured
            line = "  ".join(f"{k} {v:8.3f}{'' if k == 'MB' else ' s'}" for k, v in results[size].items())
            print(f"{size:6d} runs  {line}   (built in {built:.1f} s, indexed in {indexed:.1f} s)", flush=True)
        low, high = results[sizes[0]], results[sizes[-1]]
        print(f"ratio {sizes[-1]} / {sizes[0]} runs: " + "  ".join(f"{k} {high[k] / low[k]:.2f}x" for k in low))


if __name__ == "__main__":
    main()
