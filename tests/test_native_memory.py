"""The native reader's buffers go back to the system once DuckDB has them: a part's columns grew by realloc in glibc's
heap, where, under the mmap threshold a load's frees raise, they stayed after the part was freed (analyzer/pages.h)."""

import os
import subprocess
import sys

import pytest
from kernelscope.analyzer import ingest

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
