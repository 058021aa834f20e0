"""held.py's two ways to the spans that hold each launch point: the native sweep (_held.c) and the range join it
replaced (held_by_sql.sql, where the extension is not built) give the same `kernels`, row for row, on real traces and
on synthetic ones whose spans overlap without nesting, repeat each other or last 0 ns."""

import json
import os
import random
import subprocess
import sys

import held_fuzz
import pytest
from conftest import REPO
from kernelscope.analyzer import held, load_run, rank_parts
from sanitized import sanitized_build
from test_device_work import cpu_only_copy

pytestmark = pytest.mark.skipif(held.native_sweep is None, reason="the native sweep is not built")

TRACES = [
    "sample_traces/mlp",
    "sample_traces/threads",
    "sample_traces/static_cache_generate",
    "sample_traces/compiled_graphs",
    "sample_traces/plain_kineto/with_stack.json.gz",
    "sample_traces/plain_kineto/compile.json.gz",
    "sample_traces/external/hta_backward_thread.json",
    "sample_traces/external/tl_eval_moe_01.json",
    "sample_traces/external/kineto_resnet50_autograd_api_2021-02.pt.trace.json.gz",
]
NAMES = {
    "scopes": [
        "ks.module:enc",
        "ks.module:enc.fc",
        "ks.fn:linear#1",
        "ks.fn:relu@enc.fc",
        "aten::mm",
        "aten::add",
        "op",
    ],
    "frames": [
        "nn.Module: Enc_0",
        "nn.Module: Linear_1",
        "torch/nn/functional.py(10): relu",
        "<built-in function linear>",
        "aten::mm",
        "aten::add",
        "op",
    ],
}


def _kernels(path, native: bool, monkeypatch):
    monkeypatch.setattr(held, "native_sweep", held.native_sweep if native else None)
    with load_run(path) as run:
        return run.sql("SELECT * FROM kernels ORDER BY event_id")


def _same_both_ways(path, monkeypatch):
    swept = _kernels(path, True, monkeypatch)
    joined = _kernels(path, False, monkeypatch)
    assert len(swept) > 0
    assert swept.equals(joined)


def test_the_sweeps_result_goes_in_with_no_statement_of_its_own(monkeypatch):
    # registering it (a view's CREATE and DROP around held_native.sql) cost a small trace's load ~2 ms
    ran = []
    hold = rank_parts.hold_spans

    def logged(con, **kwargs):
        con.execute("CALL enable_logging('QueryLog')")
        try:
            hold(con, **kwargs)
        finally:
            ran.extend(con.execute("SELECT message FROM duckdb_logs() WHERE type = 'QueryLog'").fetchall())
            con.execute("CALL disable_logging()")
            con.execute("CALL truncate_duckdb_logs()")

    monkeypatch.setattr(rank_parts, "hold_spans", logged)
    assert len(_kernels("sample_traces/mlp", True, monkeypatch)) > 0  # the same rows as the SQL way: the tests below
    # (DuckDB's read-back of a small trace's result as Arrow, held.rows_of, logs no text)
    statements = [" ".join(message.split()) for (message,) in ran if message.strip()]
    assert len(statements) == 3, statements  # the points' rows, the spans', and ks_held made from the sweep's
    assert not any("ks_held_swept" in statement for statement in statements[:2])
    assert "CREATE OR REPLACE TEMP TABLE ks_held AS" in statements[2]


@pytest.mark.parametrize("name", TRACES)
def test_real_traces_give_the_same_rows_both_ways(name, monkeypatch):
    _same_both_ways(REPO / name, monkeypatch)


def test_a_cpu_only_trace_gives_the_same_rows_both_ways(tmp_path, monkeypatch):
    # its points are its operators' spans, not instants: held where a span holds the whole operator
    _same_both_ways(cpu_only_copy(REPO / "sample_traces" / "mlp" / "trace.json.gz", tmp_path), monkeypatch)


def _synthetic(seed: int, names: list[str], device: bool) -> list[dict]:
    """Spans of two threads that overlap at random (some identical, some of 0 ns), and launches among them."""
    rng = random.Random(seed)
    events, external = [], 0
    for tid in (1, 2):
        spans = []
        for _ in range(30):
            ts, dur = rng.randrange(0, 1000), rng.choice([0, rng.randrange(1, 400)])
            name = rng.choice(names)
            cat = "python_function" if "(" in name or name.startswith(("nn.", "<")) else "cpu_op"
            cat = "user_annotation" if name.startswith("ks.") else cat
            spans.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur})
        spans += [dict(rng.choice(spans)) for _ in range(4)]  # identical spans, later in the trace
        for span in spans:
            if span["cat"] == "cpu_op":
                external += 1
                span["args"] = {"External id": external}
        events += spans
        for i in range(12 if device else 0):
            correlation = 1000 * tid + i
            at = rng.randrange(0, 1000)
            args = {"correlation": correlation, "External id": rng.randrange(0, external + 3)}
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid})
            events[-1] |= {"ts": at, "dur": 1, "args": args}
            kernel = {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 2000 + 10 * i, "dur": 5}
            events.append(kernel | {"args": {"correlation": correlation, "device": 0, "stream": 7}})
    rng.shuffle(events)
    return events


@pytest.mark.parametrize("kind", sorted(NAMES))
@pytest.mark.parametrize("device", [True, False], ids=["launches", "cpu-only"])
def test_overlapping_spans_give_the_same_rows_both_ways(kind, device, tmp_path, monkeypatch):
    for seed in range(6):
        path = tmp_path / f"{kind}-{seed}.json"
        path.write_text(json.dumps({"traceEvents": _synthetic(seed, NAMES[kind], device)}))
        _same_both_ways(path, monkeypatch)


# a child that sweeps N spans of one thread and as many points (each span holding one, "held") or N // 1000 points
# (no span holding any, "unheld"), and prints the growth of its peak RSS during the sweep and its RSS after it, per
# span, in bytes; glibc's mmap threshold raised first, as the frees of a load raise it
MEMORY_CHILD = """
import re, sys
import duckdb
import held_fuzz
from kernelscope.analyzer import held
def status(key):
    return int(re.search(rf"{key}:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) << 10
n, case = int(sys.argv[1]), sys.argv[2]
con = duckdb.connect()
con.execute("SET threads = 1")
con.execute(f"CREATE TABLE r ({held_fuzz.COLUMNS})")
con.execute(f"INSERT INTO r SELECT 4, 1, 1, 10 * i, 10 * i + 5, i, -1, 0 FROM range({n}) t(i)")
at, every = (1, 1) if case == "held" else (7, 1000)
points = f"SELECT 32, 1, 1, 10 * i + {at}, 10 * i + {at + 1}, {n} + i, -1, 0 FROM range(0, {n}, {every}) t(i)"
con.execute(f"INSERT INTO r {points}")
big = bytes(32 << 20)
del big
held.native_sweep.hold(*held_fuzz.streams(con))
open("/proc/self/clear_refs", "w").write("5")
before = status("VmRSS")
points, out = held.native_sweep.hold(*held_fuzz.streams(con))
del out
print((status("VmHWM") - before) / n, (status("VmRSS") - before) / n)
"""


def _sweep_memory(case: str) -> tuple[float, float]:
    """MEMORY_CHILD's peak and kept bytes per span (Linux: it resets the peak through /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pytest.skip("no /proc/self/clear_refs to reset the peak RSS")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])}
    child = [sys.executable, "-c", MEMORY_CHILD, "2000000", case]
    done = subprocess.run(child, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    peak, kept = map(float, done.stdout.split())
    return peak, kept


def test_spans_that_hold_no_point_are_not_kept():
    # kept, a span's row costs 29 bytes and its sort 8 more: dropped as it is read, it costs nothing
    peak, _ = _sweep_memory("unheld")
    assert peak < 16, peak


def test_the_sweeps_memory_goes_back_when_it_is_done():
    # rows grown by realloc in glibc's heap stayed there once freed (46 bytes a span of this sweep's ~140)
    peak, kept = _sweep_memory("held")
    assert peak < 200 and kept < 12, (peak, kept)


def test_the_sweep_follows_its_rule_read_literally():
    """held_fuzz.py: random spans and points against the rule in Python, and the streams the sweep refuses."""
    held_fuzz.main(held.native_sweep.__file__, 60)


def test_points_under_spans_nested_deep_read_only_what_changed():
    """200,000 spans nested in one another and 2,000 launch points inside them all: each point read every open span
    (~8 ns each, 2.68 s on cpu2), where it now reads only the spans that start with it (0.10 s)."""
    import time

    import duckdb

    con = duckdb.connect()
    con.execute(f"CREATE TABLE r ({held_fuzz.COLUMNS})")
    con.execute("INSERT INTO r SELECT 1 + (i % 2) * 3, 1, 1, i, 2000000 - i, i, -1, 0 FROM range(200000) t(i)")
    con.execute("INSERT INTO r SELECT 32, 1, 1, 200000 + i, 200001 + i, 4000000 + i, -1, 0 FROM range(2000) t(i)")
    start = time.perf_counter()
    swept = held_fuzz.swept(held.native_sweep, con)
    took = time.perf_counter() - start
    assert swept[4000000] == (199998, -1, 199999, 1, 199999, -1) and len(swept) == 2000
    assert took < 1.0, took


def _sanitized_run(script: str, arguments: list[str], env: dict[str, str], says: str) -> None:
    done = subprocess.run([sys.executable, str(REPO / "tests" / script), *arguments], env=env, capture_output=True,
                          text=True, cwd=REPO / "tests")  # fmt: skip
    report = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, report
    assert says in done.stdout, report
    assert "AddressSanitizer" not in done.stderr and "runtime error" not in done.stderr, report


def test_the_sweep_under_address_and_undefined_behaviour_sanitizers(tmp_path):
    """_held.c built with -fsanitize=address,undefined and held_fuzz.py run against that build in a subprocess, as
    test_native_reader.py runs the reader's: any read or write out of bounds, or undefined behaviour, fails. Every
    array stays on malloc's heap (pages.h's PAGES_MAPPED_FROM past any size): in a map ASan sees no bounds."""
    module, env = sanitized_build("_held", tmp_path, "-DPAGES_MAPPED_FROM=((size_t)-1)")
    _sanitized_run("held_fuzz.py", [str(module), "200"], env, "as the rule reads")


def test_each_allocation_of_the_sweep_failing_in_turn_under_the_sanitizers(tmp_path):
    """held_faults.py: every malloc, realloc, mmap and mremap of a call failing in turn raises MemoryError and leaves
    no block or map behind, none freed twice, through the heap, the move into a map and mremap's growth."""
    faults = str(REPO / "tests" / "alloc_faults.h")
    module, env = sanitized_build("_held", tmp_path, "-include", faults, "-DPAGES_MAPPED_FROM=65536")
    _sanitized_run("held_faults.py", [str(module)], env, "each a MemoryError, nothing left")
