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
    assert default_memory_limit(4 << 30) == int(1.25 * (4 << 30))


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

    class Owner:
        pass

    held = []
    for json_size in (BLOCK_REUSE_MIN_JSON - 1, BLOCK_REUSE_MIN_JSON):
        con = duckdb.connect()
        limit_memory(con, Owner(), 2 << 30, json_size)
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
