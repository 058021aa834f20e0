"""Ingest: a trace cut into parts loads exactly as in one piece, whatever the cuts hit."""

import functools
import gzip
import types
from decimal import Decimal

import duckdb
import orjson
import pytest
from conftest import REPO
from kernelscope.analyzer import ingest, streamed_parts

GPT2 = REPO / "sample_traces" / "gpt2" / "trace.json.gz"
LOAD_PART = ingest._load_part


def _events(path, monkeypatch, part_bytes: int) -> tuple[duckdb.DuckDBPyConnection, list[int]]:
    """Load ``path`` with parts of about ``part_bytes``; return the connection and the parts loaded."""
    monkeypatch.setattr(ingest, "MIN_PART_BYTES", part_bytes)
    monkeypatch.setattr(ingest, "MAX_PART_BYTES", part_bytes)
    monkeypatch.setattr(ingest, "STREAM_PART_BYTES", part_bytes)
    loads = []
    monkeypatch.setattr(ingest, "_load_part", lambda *a: loads.append(a[1]) or LOAD_PART(*a))
    con = duckdb.connect()
    ingest.ingest_trace(con, path)
    return con, loads


def _same_events(a: duckdb.DuckDBPyConnection, b: duckdb.DuckDBPyConnection) -> None:
    rows_a = a.execute("SELECT * FROM events ORDER BY event_id").fetchall()
    rows_b = b.execute("SELECT * FROM events ORDER BY event_id").fetchall()
    assert rows_a == rows_b


@pytest.fixture(scope="module")
def plain_gpt2(tmp_path_factory):
    path = tmp_path_factory.mktemp("plain") / "trace.json"
    path.write_bytes(gzip.decompress(GPT2.read_bytes()))
    return path


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "gz"])
def test_many_parts_load_like_one(plain_gpt2, compressed, monkeypatch):
    path = GPT2 if compressed else plain_gpt2
    whole, one = _events(path, monkeypatch, 1 << 40)
    parts, many = _events(path, monkeypatch, 64 << 10)
    assert one == [0] and len(many) >= 3
    _same_events(whole, parts)
    events = orjson.loads(plain_gpt2.read_bytes())["traceEvents"]
    names = [row[0] for row in parts.execute("SELECT name FROM events ORDER BY event_id").fetchall()]
    assert names == [e.get("name") for e in events], "event_id is the position in traceEvents"
    assert parts.execute("SELECT min(event_id), max(event_id) FROM events").fetchone() == (0, len(events) - 1)


def test_parts_written_into_maps_earlier_parts_freed_load_like_one(tmp_path, monkeypatch):
    """A plain trace's parts keep the maps their arrays free for the next parts' (_kineto.c, keep_pages), which then
    hold what an earlier part wrote: the rows are still those of one part, and the maps go back when the load ends."""
    path = tmp_path / "trace.json"
    path.write_bytes(gzip.decompress((REPO / "sample_traces" / "maskrcnn" / "trace.json.gz").read_bytes()))
    calls, reader = [], ingest.native_reader
    kept = types.SimpleNamespace(**{name: getattr(reader, name) for name in dir(reader) if not name.startswith("__")})
    kept.keep_pages = lambda on: calls.append(on) or reader.keep_pages(on)
    monkeypatch.setattr(ingest, "native_reader", kept)
    whole, one = _events(path, monkeypatch, 1 << 40)
    assert one == [0] and calls == []  # one part: no next part to give them to
    parts, many = _events(path, monkeypatch, 2 << 20)  # each part's args (~2 MB) in a map of its own
    assert len(many) >= 6 and calls == [True, False]
    _same_events(whole, parts)


@pytest.mark.parametrize("in_memory", [True, False], ids=["memory", "files"])
def test_streamed_parts_outgrow_their_buffers(plain_gpt2, monkeypatch, in_memory):
    """Parts far larger than their buffers' first size, decompressed in small reads: the buffers grow, and
    the parts still hold every byte of the array exactly once."""
    monkeypatch.setattr(streamed_parts, "CHUNK", 4096)
    monkeypatch.setattr(streamed_parts, "MAX_BUFFER_BYTES", 1024)
    monkeypatch.setattr(ingest, "native_reader", ingest.native_reader if in_memory else None)
    whole, _ = _events(GPT2, monkeypatch, 1 << 40)
    parts, loads = _events(GPT2, monkeypatch, 256 << 10)
    assert len(loads) >= 3 and sorted(loads) == list(range(len(loads))), "one pass, no part read again"
    _same_events(whole, parts)


def _awkward_trace(path) -> None:
    """Events whose names end in '}, {' and whose args hold lists of objects: cuts land inside them."""
    events = []
    for i in range(3000):
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"op {i} {{lambda}}, {{",
                "pid": 1,
                "tid": 1,
                "ts": 1000.0 + i,
                "dur": 0.5,
                "args": {"External id": i, "shapes": [{"a": i}, {"b": [i, {"c": "}, {"}]}]},
            }
        )
    path.write_bytes(orjson.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "awkward"}))


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "gz"])
def test_cuts_inside_strings_or_nested_objects_fall_back_to_one_part(tmp_path, compressed, monkeypatch):
    path = tmp_path / "awkward.json"
    _awkward_trace(path)
    if compressed:
        path = path.with_name("awkward.json.gz")
        path.write_bytes(gzip.compress((tmp_path / "awkward.json").read_bytes()))
    whole, _ = _events(path, monkeypatch, 1 << 40)
    parts, loads = _events(path, monkeypatch, 4 << 10)
    assert len(loads) > 2 and loads.count(0) == 2 and loads[-1] == 0, "cut, failed, then loaded whole"
    _same_events(whole, parts)
    assert parts.execute("SELECT count(*), count(external_id) FROM events").fetchone() == (3000, 3000)


EXTERNAL = REPO / "sample_traces" / "external"
EPOCH_AND_2021 = [
    "hta_backward_thread.json",  # epoch ts, integer microseconds
    "hta_event_sync_multi_stream.json.gz",  # epoch ts, 3 streams
    "kineto_resnet50_autograd_api_2021-02.pt.trace.json.gz",  # the 2021 format, epoch ts, 10133 device events
]
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}


@functools.cache
def _reference_events(name: str) -> list[dict]:
    from reference import load_events

    return load_events(EXTERNAL / name)


@pytest.mark.parametrize("name", EPOCH_AND_2021)
def test_epoch_and_2021_traces_load_exactly(name):
    """Epoch-microsecond timestamps (16 integer digits) and the 2021 format's names, read natively: every event's
    ts exact to the nanosecond, every device event one row attributed as the reference attributes it, the sums
    equal, start_us from the trace's first event."""
    from kernelscope.analyzer import load_run
    from reference import assert_matches_reference

    path = EXTERNAL / name
    events = _reference_events(name)
    with load_run(path) as run:
        assert run.header.native_parts == [0] and run.header.duckdb_parts == []
        assert_matches_reference(run, path)
        ts = [row[0] for row in run.con.execute("SELECT ts_ns FROM events ORDER BY event_id").fetchall()]
        assert ts == [None if "ts" not in e else int(Decimal(e["ts"]) * 1000) for e in events]
        assert min(ts) > 10**18  # epoch: after 2001, in nanoseconds
        complete = [e for e in events if e.get("ph") == "X" and "ts" in e and Decimal(e.get("dur", -1)) >= 0]
        first = min(Decimal(e["ts"]) for e in complete)
        device = {(e["args"]["correlation"], Decimal(e["ts"]) - first) for e in complete if e["cat"] in DEVICE}
        frame = run.profiling_df()
        assert {(r.correlation, Decimal(str(r.start_us))) for r in frame.itertuples()} == device


def test_the_2021_format_reads_as_the_later_one():
    """Its categories by their later names; its launches' and device events' "external id" as external_id, which
    names their operators; its kernels' time all in the kernels table."""
    from kernelscope.analyzer import load_run

    name = "kineto_resnet50_autograd_api_2021-02.pt.trace.json.gz"
    raw = orjson.loads(gzip.decompress((EXTERNAL / name).read_bytes()))["traceEvents"]
    legacy = {"Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset", "Runtime": "cuda_runtime"}
    legacy["Operator"] = "cpu_op"
    with load_run(EXTERNAL / name) as run:
        counts = dict(run.con.execute("SELECT cat, count(*) FROM events WHERE cat IS NOT NULL GROUP BY cat").fetchall())
        for old, new in legacy.items():
            assert counts[new] == sum(e.get("cat") == old for e in raw), old
        missing = "SELECT count(*) FROM events WHERE cat IN ('kernel', 'cuda_runtime') AND external_id IS NULL"
        assert run.con.execute(missing).fetchone()[0] == 0
        kernel_ns = sum(round(e["dur"] * 1000) for e in raw if e.get("cat") == "Kernel")
        frame = run.profiling_df()
        assert round(frame.loc[frame.kind == "kernel", "kernel_us"].sum() * 1000) == kernel_ns
        assert frame["op"].notna().mean() > 0.98  # the ops reached through "external id"


def test_a_trace_truncated_while_it_is_read_is_one_line(plain_gpt2, tmp_path, monkeypatch):
    """A plain trace's parts are read where the file is mapped: truncated under the reader, the pages past its new
    end fault (SIGBUS), which the reader turns into one line instead of a killed process."""
    import os
    import shutil

    from kernelscope.analyzer import BadInputError

    path = tmp_path / "trace.json"
    shutil.copy(plain_gpt2, path)
    scan = ingest.native_reader.scan

    class TruncatingReader:
        @staticmethod
        def scan(data, first_id, *flags):
            os.truncate(path, 4096)  # the part is mapped already: only its first page is left
            return scan(data, first_id, *flags)

    monkeypatch.setattr(ingest, "native_reader", TruncatingReader)
    with pytest.raises(BadInputError, match=r"trace\.json: was truncated while it was read \(is it still being"):
        ingest.ingest_trace(duckdb.connect(), path)
    assert scan(b'[{"ph": "X"}]', 0)[0] == 1, "the reader reads on"


def _failing_after_the_cut(path, monkeypatch, failure: str) -> None:
    """Make the trace at ``path`` fail once its parts are cut and their loading starts, the way a disk, a network
    file system or a user deleting it fails a long ingest: ``vanished`` removes it; ``eio`` fails every open of it
    with EIO; ``eio-mapped`` fails its mapped pages under the native reader (which raises OSError on the SIGBUS);
    ``eio-copy`` fails its reads while a part is copied for DuckDB's reader (the native reader leaves the part)."""
    import builtins
    import errno
    import os

    from kernelscope.analyzer import trace_parts

    def eio(*args, **kwargs):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    loading = []

    def load_part(*args):
        if not loading and failure == "vanished":
            os.remove(path)
        loading.append(args[1])
        return LOAD_PART(*args)

    monkeypatch.setattr(ingest, "_load_part", load_part)
    if failure == "eio":
        opened = builtins.open
        monkeypatch.setattr(trace_parts, "open", lambda f, *a, **k: eio() if f == path else opened(f, *a, **k), False)
    if failure == "eio-mapped":
        monkeypatch.setattr(ingest, "native_reader", type("Reader", (), {"scan": staticmethod(eio)}))
    if failure == "eio-copy":
        pread = os.pread
        monkeypatch.setattr(ingest, "native_reader", type("Reader", (), {"scan": lambda *a: (None, "left", 0)}))
        monkeypatch.setattr(os, "copy_file_range", eio)
        monkeypatch.setattr(os, "pread", lambda *a: eio() if loading else pread(*a))


@pytest.mark.parametrize(
    "failure, cause",
    [
        ("vanished", "No such file or directory"),
        ("eio", "Input/output error"),
        ("eio-mapped", "an I/O error under its mapped pages"),
        ("eio-copy", "Input/output error"),
    ],
)
def test_a_trace_that_fails_while_it_is_read_is_one_line_naming_it(plain_gpt2, tmp_path, monkeypatch, failure, cause):
    """The parts of a plain trace are read from the file by name on the loading threads, after the cut: a trace
    that vanishes, or whose reads fail there, is one BadInputError naming the trace, not an OSError (that names no
    file when a read fails) from a loading thread."""
    import shutil

    from kernelscope.analyzer import BadInputError

    path = tmp_path / "trace.json"
    shutil.copy(plain_gpt2, path)
    _failing_after_the_cut(path, monkeypatch, failure)
    with pytest.raises(BadInputError) as raised:
        ingest.ingest_trace(duckdb.connect(), path)
    assert str(raised.value) == f"{path}: could not be read while it was loaded ({cause})"


def test_an_io_error_while_analyze_reads_is_one_line_and_exit_2(plain_gpt2, tmp_path, monkeypatch):
    import shutil

    from click.testing import CliRunner
    from kernelscope.cli import main

    path = tmp_path / "trace.json"
    shutil.copy(plain_gpt2, path)
    _failing_after_the_cut(path, monkeypatch, "eio")
    result = CliRunner().invoke(main, ["analyze", str(path)], catch_exceptions=False)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"kernelscope: error: {path}: could not be read while it was loaded (Input/output error)\n"


def test_a_compressed_trace_whose_read_fails_partway_is_one_line(tmp_path, monkeypatch):
    """A .json.gz is read on one thread as it decompresses: a read that fails partway (EIO) is the system's reason,
    not a gzip error."""
    import builtins
    import errno
    import io
    import os

    from kernelscope.analyzer import BadInputError, event_array

    class FailingPartway(io.FileIO):
        def readinto(self, buffer):
            if self.tell() >= 16 << 10:
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            return super().readinto(memoryview(buffer)[:4096])

    opened = builtins.open
    monkeypatch.setattr(event_array, "open", lambda f, *a: FailingPartway(f) if f == GPT2 else opened(f, *a), False)
    with pytest.raises(BadInputError) as raised:
        ingest.ingest_trace(duckdb.connect(), GPT2)
    assert str(raised.value) == f"{GPT2}: cannot be read (Input/output error)"


def test_a_full_scratch_disk_is_reported_against_the_scratch_directory(tmp_path):
    """A trace is cut into parts in TMPDIR while it is read (a gzip one decompressed there, where the parts do not
    fit in memory): a full disk there is not the trace's fault, and the line says where the space ran out (the CLI
    prints an OSError's file and text, exit 2); a read error of the trace itself still names the trace."""
    import errno
    import gzip
    import os
    import tempfile

    from kernelscope.analyzer import BadInputError
    from kernelscope.analyzer.event_array import open_trace

    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    for code in (errno.ENOSPC, errno.EDQUOT):
        with pytest.raises(OSError) as raised, open_trace(path, True) as stream:
            stream.read()
            raise OSError(code, os.strerror(code))  # a part written to the scratch directory
        assert not isinstance(raised.value, BadInputError)
        assert raised.value.errno == code and raised.value.filename == tempfile.gettempdir()
        assert raised.value.strerror == (
            f"{os.strerror(code)} (cutting trace.json.gz into parts; TMPDIR names another scratch directory)"
        )
    with pytest.raises(BadInputError, match=r"trace\.json\.gz: cannot be read \(Input/output error\)$"):
        with open_trace(path, True):
            raise OSError(errno.EIO, os.strerror(errno.EIO))


def test_a_plain_trace_is_cut_at_the_first_boundary_reading_little_past_it(tmp_path, monkeypatch):
    """Each cut of a plain trace is the first boundary in the search window after its target, as a search of the
    whole window finds it, however far it is (events of 100 KB and 2 MB here); a boundary a few bytes away is found
    without reading the whole window."""
    from kernelscope.analyzer import event_array
    from kernelscope.analyzer.trace_parts import BOUNDARY

    events = [
        {"ph": "X", "cat": "cpu_op", "name": "x" * size, "ts": i, "dur": 1}
        for i, size in enumerate([10, 100_000, 10, 2_000_000, 10, 5, 70_000, 10])
    ]
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}, option=orjson.OPT_INDENT_2))
    read = []
    pread = event_array.os.pread
    monkeypatch.setattr(event_array.os, "pread", lambda fd, n, offset: read.append(n) or pread(fd, n, offset))
    with open(path, "rb") as raw:
        fd = raw.fileno()
        for offset in range(0, path.stat().st_size, 9_973):
            whole = BOUNDARY.search(pread(fd, event_array.SEARCH_WINDOW, offset))
            found = event_array._first_boundary(fd, offset)
            assert (found and found.span()) == (whole and whole.span()), offset
        read.clear()
        assert event_array._first_boundary(fd, 0) is not None
        assert sum(read) <= event_array.FIRST_SEARCH_WINDOW


def test_the_parts_in_flight_stay_within_a_share_of_the_memory_limit_whatever_the_threads(plain_gpt2, monkeypatch):
    """Eight threads, a budget of 300 KB: no more bytes of parts load at once than the budget holds (parts of
    the size one per thread held ~1.5x the JSON on 16 emulated cores), and the rows are those of one part."""
    import threading
    import time

    from kernelscope.analyzer import memory

    whole, _ = _events(plain_gpt2, monkeypatch, 1 << 40)
    monkeypatch.setattr(ingest, "MIN_PART_BYTES", 64 << 10)
    monkeypatch.setattr(ingest, "MIN_FLIGHT_PART_BYTES", 16 << 10)
    part = 100 << 10
    monkeypatch.setattr(ingest, "in_flight_bytes", lambda settings: 3 * part + 1000)
    lock, busy, most, parts = threading.Lock(), [0], [0], []

    def load_part(*args):
        with lock:
            parts.append(args[1])
            busy[0] += 1
            most[0] = max(most[0], busy[0])
        time.sleep(0.01)
        try:
            return LOAD_PART(*args)
        finally:
            with lock:
                busy[0] -= 1

    monkeypatch.setattr(ingest, "_load_part", load_part)
    con = duckdb.connect()
    con.execute("SET threads = 8")
    ingest.ingest_trace(con, plain_gpt2)
    part_bytes = -(-plain_gpt2.stat().st_size // len(parts))
    assert len(parts) % 8 == 0 and most[0] * part_bytes <= 3 * part + 1000 and len(parts) > 8
    assert memory.IN_FLIGHT_SHARE < 1
    _same_events(whole, con)


def test_an_event_larger_than_duckdbs_default_object_size_loads(tmp_path):
    """A name of 6 million \\u escapes (36 MB of JSON in one event): the native reader leaves escapes to DuckDB's
    reader, which refuses one past its default 16 MiB (once the object fills two buffers of that size); the part is
    read again with its own size as the limit."""
    from kernelscope.analyzer import load_run
    from reference import assert_matches_reference

    text = gzip.decompress((REPO / "sample_traces" / "mlp" / "trace.json.gz").read_bytes())
    name = b"\\u00e9" * 6_000_000
    path = tmp_path / "trace.json"
    path.write_bytes(text.replace(b'"name": "nvjet', b'"name": "' + name + b"nvjet", 1))
    with load_run(path) as run:
        assert_matches_reference(run, path)
        assert run.profiling_df()["kernel"].str.startswith("\u00e9" * 6_000_000).sum() == 1


@pytest.mark.parametrize("native", [True, False], ids=["in place", "part files"])
def test_a_scratch_folder_is_made_only_for_part_files_and_goes_with_the_load(tmp_path, monkeypatch, native):
    """The native reader reads a trace's parts in place, with no folder made for it; DuckDB's reader reads part files,
    in a folder of TMPDIR removed after the load. A TMPDIR that cannot hold one is its own fault, not the trace's."""
    import os
    import tempfile

    from kernelscope.analyzer import BadInputError, trace_parts

    made = []
    mkdir = os.mkdir
    mkdir(tmp_path / "tmp")
    monkeypatch.setattr(trace_parts.os, "mkdir", lambda path, *args: made.append(path) or mkdir(path, *args))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(ingest, "native_reader", ingest.native_reader if native else None)
    con = duckdb.connect()
    ingest.ingest_trace(con, GPT2)
    assert con.execute("SELECT count(*) FROM events").fetchone()[0] > 0
    assert len(made) == (0 if native else 1) and os.listdir(tmp_path / "tmp") == []
    if native:
        return
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    with pytest.raises(OSError) as raised:
        ingest.ingest_trace(duckdb.connect(), GPT2)
    assert not isinstance(raised.value, BadInputError), "the trace is not to blame"
    assert raised.value.filename.startswith(str(tmp_path / "missing")) and "TMPDIR" in raised.value.strerror
