"""The repeats validate_repeats.sql looks for (rules 8, 9) in a trace the native reader reads in several parts: each
part's own answer and keys (scan), and whether two parts share a key (repeated_across), give the query's answer, or
None where a key is shared (the query then settles it), so that a large trace does not need that query."""

import functools
import gzip
import json
import random

import duckdb
import pytest
from kernelscope.analyzer import ingest
from kernelscope.analyzer.sql import define_scope_names, run_sql_file, sql_text
from test_native_reader import repeat_events


@functools.cache
def _query_connection() -> duckdb.DuckDBPyConnection:
    """One connection for every query's answer (events.sql replaces its table): a connection each took most of the
    600 random traces' time, and 200 s of the sanitizers' run."""
    con = duckdb.connect()
    define_scope_names(con, "ks.module:", "ks.fn:")  # the macros every run's connection has (ks_launch_family)
    return con


def _answer_of_the_query(streams) -> bool:
    """validate_repeats.sql's answer on the parts' rows, inserted one after the other as ingest.py does."""
    con = _query_connection()
    run_sql_file(con, "events.sql")
    first = 0
    for rows, stream, facts in streams:
        con.register("scanned_part", ingest._ArrowStream(stream))
        run_sql_file(con, ingest.scanned_insert(facts), first_id=str(first), rank="0")
        con.unregister("scanned_part")
        first += rows
    return con.execute(sql_text("validate_repeats.sql")).fetchone()[0]


def _answer_of_the_parts(scans) -> bool | None:
    """TraceHeader.settle_repeats' answer for parts the native reader read, from their scans."""
    header = ingest.TraceHeader("trace.json", False, 1)
    header.native_parts = list(range(len(scans)))
    for index, scanned in enumerate(scans):
        header.part_repeats[index] = scanned[3]
        if scanned[4] is not None:
            header.repeat_keys.append(scanned[4])
    header.settle_repeats()
    assert header.repeat_keys == [], "the keys are dropped once settled"
    return header.repeats


def test_random_traces_cut_into_parts_have_the_querys_answer():
    rng = random.Random(1206)
    seen = {"none": 0, "within a part": 0, "across parts": 0}
    for _ in range(600):  # a device event's tid is a key of its own (its stream where it has none): fewer repeats
        events = repeat_events(rng, rng.randrange(2, 13))
        cuts = sorted(rng.sample(range(1, len(events)), rng.randrange(0, min(4, len(events)))))
        parts = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)], strict=True)]
        scans = [ingest.native_reader.scan(("[" + ", ".join(p) + "]").encode(), 0, False, True) for p in parts]
        assert all(s[0] is not None for s in scans), parts
        assert all((s[4] is None) == s[3] for s in scans), "keys exactly where the part holds no repeat"
        expected, answer = _answer_of_the_query([(s[0], s[1], s[5]) for s in scans]), _answer_of_the_parts(scans)
        # a key two parts share leaves it to the query, which finds that repeat; never a wrong True or False
        assert answer is expected or (answer is None and expected), parts
        seen["none" if not expected else "within a part" if answer else "across parts"] += 1
    assert min(seen.values()) > 40, seen


def test_keys_are_shared_only_by_the_same_key():
    launch = '{"ph": "X", "cat": "%s", "name": "n", "pid": %d, "tid": 1, "ts": 1, "dur": 1, "args": {"correlation": 5}}'
    kernel = '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": %s, "dur": 1, "args": %s}'

    def keys(*events: str) -> bytes:
        scanned = ingest.native_reader.scan(("[" + ", ".join(events) + "]").encode(), 0, False, True)
        assert scanned[3] is False
        return scanned[4]

    shared = ingest.native_reader.repeated_across
    # one runtime's calls (cuda_runtime and cuda_driver are CUDA's) in other processes: one key (rule 8 groups no pid)
    assert shared([keys(launch % ("cuda_runtime", 1)), keys(launch % ("cuda_driver", 2))])
    assert not shared([keys(launch % ("cuda_runtime", 1)), keys(launch % ("xpu_runtime", 1))])
    # a device event's key is its correlation, device, stream and start, a missing one a value of its own
    args = '{"correlation": 5, "device": 0, "stream": 7}'
    assert shared([keys(kernel % (1, args)), keys(kernel % (1, args))])
    assert not shared([keys(kernel % (1, args)), keys(kernel % (2, args))])
    assert not shared([keys(kernel % (1, args)), keys(kernel % (1, '{"correlation": 5, "stream": 7}'))])
    assert shared([keys(kernel % (1, '{"correlation": 5}')), keys(kernel % (1, '{"correlation": 5}'))])
    # without a stream, its tid's (7: the kernel's tid, as Kineto writes a queue); a tid of text is none
    assert shared([keys(kernel % (1, args)), keys(kernel % (1, '{"correlation": 5, "device": 0}'))])
    elsewhere = kernel.replace('"tid": 7', '"tid": 8') % (1, '{"correlation": 5, "device": 0}')
    assert not shared([keys(kernel % (1, args)), keys(elsewhere)])
    named = kernel.replace('"tid": 7', '"tid": "7"') % (1, '{"correlation": 5, "device": 0}')
    assert not shared([keys(kernel % (1, args)), keys(named)])
    # a launch and a device event of one correlation are no repeat
    assert not shared([keys(launch % ("cuda_runtime", 1)), keys(kernel % (1, args))])
    assert not shared([keys(launch % ("cuda_runtime", 1))]) and not shared([])
    with pytest.raises(ValueError, match="not a whole number of keys"):
        shared([b"\0" * 12])
    with pytest.raises(TypeError):
        shared([keys(kernel % (1, args)), "not bytes"])


def _read_in_parts(events: list[dict], compressed: bool, tmp_path, monkeypatch):
    """The trace of ``events`` ingested in parts of 32 KB: its connection (with the macros), header and path."""
    text = json.dumps({"traceEvents": events}, indent=1).encode()
    path = tmp_path / ("trace.json.gz" if compressed else "trace.json")
    path.write_bytes(gzip.compress(text) if compressed else text)
    for name in ("MIN_PART_BYTES", "MAX_PART_BYTES", "STREAM_PART_BYTES"):
        monkeypatch.setattr(ingest, name, 32 << 10)
    con = duckdb.connect()
    header = ingest.ingest_trace(con, path)
    assert len(header.native_parts) > 1 and not header.duckdb_parts and header.all_rows_checked
    define_scope_names(con, "ks.module:", "ks.fn:")
    return con, header, path


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "gz"])
def test_a_trace_read_in_parts_without_repeats_needs_no_query(compressed, tmp_path, monkeypatch):
    events = [
        {"ph": "X", "cat": cat, "name": "n", "pid": 1, "tid": 1, "ts": i, "dur": 1, "args": {"correlation": i}}
        for i in range(3000) for cat in ("cuda_runtime", "kernel")
    ]  # fmt: skip
    con, header, _ = _read_in_parts(events, compressed, tmp_path, monkeypatch)
    assert len(header.native_parts) > 3
    assert header.repeats is con.execute(sql_text("validate_repeats.sql")).fetchone()[0] is False


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "gz"])
def test_a_repeat_across_parts_is_found_by_the_query(compressed, tmp_path, monkeypatch):
    """The reader sees one part at a time: where two parts share a key, validate_repeats.sql runs and names it."""
    from kernelscope.analyzer import BadInputError
    from kernelscope.analyzer.validate import validate_events

    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": i, "dur": 1,
         "args": {"correlation": i}}
        for i in range(3000)
    ]  # fmt: skip
    events[2900]["args"]["correlation"] = 10  # a launch that shares the correlation of one in the first part
    con, header, path = _read_in_parts(events, compressed, tmp_path, monkeypatch)
    assert header.repeats is None
    with pytest.raises(BadInputError, match=r"traceEvents\[2900\] .* shares correlation 10 with another launch"):
        validate_events(con, path, rows_checked=header.all_rows_checked, repeats=header.repeats)


def test_the_check_across_parts_holds_little_memory_however_many_keys(tmp_path):
    """A 9 GB trace's parts hold ~8 M keys: a hash set of them all would be 128 MB outside DuckDB's memory limit at
    the end of the ingest; the check goes a slice of the hash space at a time. Its result is the same: 3 M keys
    (several slices), once distinct, once with one key in two parts. In a process of its own, for its peak RSS."""
    import subprocess
    import sys

    script = """
import random
from kernelscope.analyzer import _kineto
def kib(field):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field))
rng = random.Random(7)
parts = [rng.randbytes(8_000_000) for _ in range(3)]
again = parts[1][800_000:800_008]
with open("/proc/self/clear_refs", "w") as clear:  # the peak (VmHWM) from here on
    clear.write("5")
before = kib("VmRSS:")
distinct = _kineto.repeated_across(parts)
grew = kib("VmHWM:") - before
shared = _kineto.repeated_across([*parts, again])
print(distinct, shared, grew // 1024)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    distinct, shared, grew_mib = done.stdout.split()
    assert (distinct, shared) == ("False", "True")
    assert int(grew_mib) < 20, f"the check took {grew_mib} MiB for 3 M keys"
