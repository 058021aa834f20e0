"""The native reader's buffers go back to the system once DuckDB has them: a part's columns grew by realloc in glibc's
heap, where, under the mmap threshold a load's frees raise, they stayed after the part was freed (analyzer/pages.h)."""

import os
import subprocess
import sys

import pytest
from kernelscope.analyzer import ingest
from sanitized import sanitized_build

pytestmark = pytest.mark.skipif(ingest.native_reader is None, reason="the native reader is not built")

# a child that scans a part of 200,000 events three times, dropping each, with a small allocation after each scan (a
# load's other work allocates all along), and prints the RSS it gained per byte of the part
CHILD = """
import re
from kernelscope.analyzer import ingest
def rss():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) << 10
event = '{"ph": "X", "cat": "cpu_op", "name": "aten::mm%d", "pid": 1, "tid": 2, "ts": %d.5, "dur": 3, '
event += '"args": {"External id": %d}}'
part = ("[" + ",".join(event % (i % 50, i, i) for i in range(200000)) + "]").encode()
big = bytes(32 << 20)  # glibc's mmap threshold raised, as the frees of a load raise it
del big
before, pinned = rss(), []
for _ in range(3):
    scanned = ingest.native_reader.scan(part, 0)
    pinned.append(bytearray(1000))
    del scanned
print((rss() - before) / len(part))
"""


def test_a_parts_columns_are_given_back_once_freed():
    if not os.path.exists("/proc/self/status"):
        pytest.skip("no /proc/self/status to read the RSS from")
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    kept = float(done.stdout)
    assert kept < 0.1, kept  # in glibc's heap: 0.97 bytes per byte of the part, its whole columns


# a child that scans a part three times while a load keeps the freed maps, the rows of each scan read through DuckDB,
# then stops keeping them; it prints the page faults of each scan, whether the rows were the same each time, and
# the RSS that stopping gave back, per byte of the part
CHILD_KEPT = """
import re, resource
import duckdb
from kernelscope.analyzer import ingest
def rss():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) << 10
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
event = '{"ph": "X", "cat": "cpu_op", "name": "aten::mm%d", "pid": 1, "tid": %s, "ts": %d.5, "dur": 3%s}'
part = ",".join(event % (i % 50, i % 3 or '"t"', i, ', "args": {"External id": %d}' % i if i % 4 else "")
                for i in range(100000))
part = ("[" + part + "]").encode()
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
SUMMED = "SELECT count(*), sum(hash(p)) FROM (SELECT scanned_part AS p FROM scanned_part)"
counts, rows = [], []
ingest.native_reader.keep_pages(True)
for _ in range(3):
    start = faults()
    scanned = ingest.native_reader.scan(part, 0)
    counts.append(faults() - start)
    con.register("scanned_part", ingest._ArrowStream(scanned[1]))
    rows.append(con.execute(SUMMED).fetchall())
    con.execute("SELECT 1").fetchall()  # the scan's result, which holds its arrays, goes
    con.unregister("scanned_part")
    del scanned
held = rss()
ingest.native_reader.keep_pages(False)
print(counts, rows[0] == rows[1] == rows[2], (held - rss()) / len(part))
"""


def test_a_loads_parts_reuse_the_maps_it_keeps_and_give_them_back_at_its_end():
    if not os.path.exists("/proc/self/status"):
        pytest.skip("no /proc/self/status to read the RSS from")
    done = subprocess.run([sys.executable, "-c", CHILD_KEPT], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    counts, same, kept = done.stdout.rsplit(" ", 2)
    first, *later = eval(counts)
    assert all(count < first / 4 for count in later), (first, later)  # the pages written once are written again
    assert same == "True"  # a reused map holds an earlier part's bytes: nothing may read what this part did not write
    assert float(kept) > 0.3, kept  # the last scan's maps, kept until the load stops


# a child that loads the sanitized reader and scans parts of mixed sizes while two loads keep maps, freeing the arrays
# in a random order (some after both loads stop), so that kept maps are taken back at other sizes
CHILD_SANITIZED = """
import importlib.util, random, sys
spec = importlib.util.spec_from_file_location("_kineto", sys.argv[1])
reader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reader)
rng, held = random.Random(5), []
event = '{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 1, "tid": %s, "ts": %d.5, "dur": 3, "args": {"stream": 7}}'
# each size's part made once: made for each scan, under the sanitizers, they were most of the test's 30 s
parts = {n: ("[" + ",".join(event % (j % 9, j % 3 or '"t"', j) for j in range(n)) + "]").encode()
         for n in (10, 2000, 30000, 90000)}
for _ in range(3):
    reader.keep_pages(True)
    reader.keep_pages(True)
    for _ in range(40):
        count = rng.choice([10, 2000, 30000, 90000])
        part = parts[count]
        scanned = reader.scan(part, 0, False, True)
        assert scanned[0] == count
        held.append(scanned)
        if len(held) > 3 or rng.random() < 0.3:
            held.pop(rng.randrange(len(held)))
    reader.keep_pages(False)
    reader.keep_pages(False)
    held.clear()
"""


@pytest.mark.parametrize("flags", [[], ["-DPAGES_MAPPED_FROM=4096"]], ids=["maps-from-1MiB", "maps-from-a-page"])
def test_kept_maps_under_the_sanitizers(tmp_path, flags):
    module, env = sanitized_build("_kineto", tmp_path, *flags)
    done = subprocess.run([sys.executable, "-c", CHILD_SANITIZED, str(module)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
