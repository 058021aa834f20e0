"""The memory a run's DuckDB may use, and its scratch spill directory."""

import gc
import gzip
import os

import pandas as pd
from conftest import REPO
from kernelscope.analyzer import load_run
from kernelscope.analyzer.memory import (
    BLOCK_REUSE_MIN_JSON,
    MIN_LIMIT,
    default_memory_limit,
    json_bytes,
    limit_memory,
    memory_bytes,
)

BERT = REPO / "sample_traces" / "bert"


def test_json_bytes_of_a_gzip_trace_is_its_decompressed_size():
    trace = BERT / "trace.json.gz"
    assert json_bytes(trace, compressed=True) == len(gzip.decompress(trace.read_bytes()))


def test_default_limit_grows_with_the_trace_from_a_floor():
    assert default_memory_limit(0) == MIN_LIMIT
    assert default_memory_limit(4 << 30) == 4 << 30


def test_a_tight_limit_gives_the_same_rows_and_the_spill_directory_goes_with_the_run():
    with load_run(BERT) as run:
        expected = run.profiling_df()
    run = load_run(BERT, memory_limit="64MB")
    settings = "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
    limit, spill = run.con.execute(settings).fetchone()
    assert limit == "61.0 MiB" and os.path.basename(spill).startswith("kernelscope-spill-")
    pd.testing.assert_frame_equal(run.profiling_df(), expected)
    run.close()
    del run
    gc.collect()
    assert not os.path.exists(spill)


def test_freed_blocks_are_kept_for_reuse_only_for_large_traces():
    """DuckDB's block allocator keeps freed blocks (fewer page faults on large traces) but costs small ones
    time and memory: it is turned on from BLOCK_REUSE_MIN_JSON, up to the run's limit."""
    import duckdb

    held = []
    for json_size in (BLOCK_REUSE_MIN_JSON - 1, BLOCK_REUSE_MIN_JSON):
        con = duckdb.connect()
        limit_memory(con, 2 << 30, json_size)
        held.append(con.execute("SELECT current_setting('block_allocator_memory')").fetchone()[0])
    assert held == ["0 bytes", "1.0 GiB"]  # half the limit


def test_memory_amounts_read_as_duckdb_reads_them():
    assert [memory_bytes(v) for v in (3000, "4GB", "1.5GiB", " 512 mb ", "80%")] == [
        3000,
        4 * 10**9,
        3 << 29,
        512 * 10**6,
        None,
    ]


def _gzip_bomb(path, head: bytes, filler: bytes, repeats: int, tail: bytes):
    """A gzip file of small size that decompresses to head + filler * repeats + tail: one gzip member of the filler,
    repeated (gzip readers read concatenated members as one stream)."""
    member = gzip.compress(filler, 1)
    with open(path, "wb") as out:
        out.write(gzip.compress(head, 1))
        for _ in range(repeats):
            out.write(member)
        out.write(gzip.compress(tail, 1))
    return path


BLANKS = b" " * (1 << 20)
LIMITS = {"memory_limit": "64MB", "disk_limit": "32MB"}


def test_a_gzip_bomb_of_blanks_is_refused_within_the_memory_limit(tmp_path):
    """4 GiB of blanks inside traceEvents (4.6 MB of gzip): no place to cut a part, so a part may grow only to the
    memory limit; then one line. Peak RSS measured in a process of its own."""
    import subprocess
    import sys

    bomb = _gzip_bomb(tmp_path / "blanks.json.gz", b'{"traceEvents": [', BLANKS, 4096, b"]}")
    probe = (  # a sample run first, so that the threads and allocator arenas any load takes are in the baseline
        "import resource, sys\n"
        "from kernelscope.analyzer import KernelscopeError, load_run\n"
        f"load_run(sys.argv[2], **{LIMITS!r}).close()\n"
        "baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n"
        f"    load_run(sys.argv[1], **{LIMITS!r})\n"
        "except KernelscopeError as exc:\n"
        "    print(exc)\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - baseline) >> 10)\n"
    )
    sample = REPO / "sample_traces" / "demo"
    done = subprocess.run(
        [sys.executable, "-c", probe, str(bomb), str(sample)], capture_output=True, text=True, timeout=300
    )
    message, peak_mib = done.stdout.strip().splitlines()
    assert message == (
        f"{bomb}: holds more than 64 MiB of traceEvents with no place between two events to cut it (one event, or"
        " blanks, that large), more than the memory limit (61.0 MiB) allows"
    ), done.stderr
    assert int(peak_mib) < 512, f"RSS grows by little more than the limit (4 GiB were there to take): {peak_mib} MiB"


def test_a_gzip_bomb_that_decompresses_past_both_limits_is_refused(tmp_path):
    """Events apart by 1 MiB of blanks each, cut into parts as usual: what the stream decompresses to is bounded by
    twice the memory and disk limits."""
    import pytest
    from kernelscope.analyzer import BadInputError

    event = b'{"ph": "i", "name": "x"}, '
    bomb = _gzip_bomb(tmp_path / "spaced.json.gz", b'{"traceEvents": [', BLANKS + event, 20 << 10, b"{}]}")
    with pytest.raises(BadInputError, match=r"spaced\.json\.gz: decompresses to more than 183 MiB of JSON, more than"):
        load_run(bomb, **LIMITS)


def test_a_document_without_traceevents_in_its_head_is_parsed_whole_only_within_the_memory_limit(tmp_path):
    import pytest
    from kernelscope.analyzer import BadInputError

    bomb = _gzip_bomb(tmp_path / "late.json.gz", b'{"other": [', BLANKS, 80, b'], "traceEvents": []}')
    with pytest.raises(BadInputError, match=r"late\.json\.gz: has no traceEvents where a Kineto trace has it, and is"):
        load_run(bomb, **LIMITS)


def test_a_trace_past_the_memory_and_the_disk_limit_is_one_line():
    """DuckDB spills no more than the disk limit (max_temp_directory_size); past both limits the trace is refused,
    the limits named."""
    import pytest
    from kernelscope.analyzer import BadInputError

    with load_run(BERT) as run:
        disk = run.con.execute("SELECT current_setting('max_temp_directory_size')").fetchone()[0]
    assert disk == "4.0 GiB"  # MIN_DISK_LIMIT: twice the JSON is less
    with pytest.raises(BadInputError, match=r"needs more than the memory limit \(30\.5 MiB\) and the disk limit"):
        load_run(REPO / "sample_traces" / "gpt2", memory_limit="32MB", disk_limit="1MB")
