"""Gzip files of indexed members (the recorder's trace.json.gz): read exactly as one stream, decompressed in parallel,
and bad ones refused in one sentence, as a gzip file of one member is."""

from __future__ import annotations

import gzip
import io
import os

import duckdb
import orjson
import pytest
from conftest import REPO
from kernelscope.analyzer import (
    BadInputError,
    event_array,
    gzip_blank_tail,
    gzip_members,
    ingest,
    load_run,
    streamed_parts,
)
from kernelscope.analyzer.gzip_members import HEADER_BYTES, MemberStream, write_members
from kernelscope.analyzer.gzip_members import gzip_members as members_of
from kernelscope.analyzer.memory import json_bytes
from reference import assert_matches_reference
from test_trace_text import reader  # noqa: F401 - the fixture of both readers

GPT2 = REPO / "sample_traces" / "gpt2" / "trace.json.gz"


def _members(data: bytes, member_bytes: int) -> bytes:
    out = io.BytesIO()
    write_members(io.BytesIO(data), out, 2, member_bytes)
    return out.getvalue()


@pytest.mark.parametrize("size", [0, 1, 999, 1000, 1001, 5000])
def test_members_decompress_to_the_source_with_any_gzip_reader(tmp_path, size):
    data = os.urandom(size // 2) + b"x" * (size - size // 2)
    path = tmp_path / "t.gz"
    path.write_bytes(_members(data, 1000))
    assert gzip.decompress(path.read_bytes()) == data
    with open(path, "rb") as raw:
        found = members_of(raw.fileno())
    assert [m.size for m in found] == [1000] * (size // 1000) + [size % 1000] * (size % 1000 > 0 or size == 0)
    assert json_bytes(path, compressed=True) == size


@pytest.mark.parametrize("threads", [1, 3])
def test_the_member_stream_reads_the_members_in_order(tmp_path, threads):
    data = b"".join(b"%d," % i for i in range(200_000))
    path = tmp_path / "t.gz"
    path.write_bytes(_members(data, 10_000))
    with open(path, "rb") as raw:
        stream = MemberStream(path, raw, members_of(raw.fileno()), threads)
        with stream:
            got = stream.read(7) + stream.read(12_345)
            piece = bytearray(4_321)
            while count := stream.readinto(piece):
                got += piece[:count]
    assert got == data


def test_a_gzip_file_of_one_member_or_of_members_without_the_index_is_no_indexed_file(tmp_path):
    plain = tmp_path / "one.gz"
    plain.write_bytes(gzip.compress(b"abc") + gzip.compress(b"def"))
    indexed = _members(b"abc" * 1000, 1000)
    cut = tmp_path / "cut.gz"
    cut.write_bytes(indexed[:-1])  # the chain does not end where the file does
    for path in (plain, cut):
        with open(path, "rb") as raw:
            assert members_of(raw.fileno()) is None


def _events(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute("SELECT * FROM events ORDER BY event_id").fetchall()


@pytest.mark.parametrize(
    ("part_bytes", "member_bytes", "per_member"),
    [(1 << 40, 100_000, False), (1 << 20, 100_000, False), (256 << 10, 200_000, True), (256 << 10, 200_000, None)],
    ids=["one part", "parts of several members", "a part per member", "a part per member, DuckDB's reader"],
)
def test_a_trace_of_indexed_members_loads_as_its_json_does(tmp_path, monkeypatch, part_bytes, member_bytes, per_member):
    """Members read as a stream and cut as any (copied), or one part per member in its own buffer (no copy), read
    by the native reader or (None) written to part files for DuckDB's: the same rows as the plain trace and as one
    gzip member."""
    if per_member is None:
        monkeypatch.setattr(ingest, "native_reader", None)
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress(GPT2.read_bytes()))
    indexed = tmp_path / "trace.json.gz"
    indexed.write_bytes(_members(plain.read_bytes(), member_bytes))
    monkeypatch.setattr(ingest, "STREAM_PART_BYTES", part_bytes)
    monkeypatch.setattr(ingest, "MAX_PART_BYTES", part_bytes)
    monkeypatch.setattr(ingest, "MIN_PART_BYTES", part_bytes)
    streams, cuts, loads = [], [], []
    made = gzip_members.MemberStream.__init__
    monkeypatch.setattr(gzip_members.MemberStream, "__init__", lambda self, *a: streams.append(a) or made(self, *a))
    by_member = event_array.stream_member_parts
    monkeypatch.setattr(event_array, "stream_member_parts", lambda *a: cuts.append(a) or by_member(*a))
    load_part = ingest._load_part
    monkeypatch.setattr(ingest, "_load_part", lambda *a: loads.append(a[1]) or load_part(*a))
    rows = []
    for path in (plain, indexed, GPT2):
        con = duckdb.connect()
        con.execute("SET threads = 4")
        ingest.ingest_trace(con, path)
        rows.append(_events(con))
        loads.append(None)
    # decoded ahead on half the 4 threads, within the parts in flight (2 for one part of unbounded size: 1 thread)
    assert len(streams) == 1 and len(streams[0][2]) > 5 and streams[0][3] == (1 if part_bytes == 1 << 40 else 2)
    assert len(cuts) == (per_member is not False)
    first = loads.index(None)
    parts = loads[first + 1 : loads.index(None, first + 1)]
    assert len(parts) == (len(streams[0][2]) if per_member is not False else -(-plain.stat().st_size // part_bytes))
    assert rows[1] == rows[0] and rows[2] == rows[0]


def test_an_event_larger_than_its_members_moves_its_part_to_a_larger_buffer(tmp_path, monkeypatch):
    """Members with no boundary between two events in them (one event of 3 MB across 15 of them) are copied whole
    into the part, which outgrows its member's buffer and the room after it."""
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": i, "dur": 1} for i in range(3000)]
    events[1500]["args"] = {"big": os.urandom(3 << 19).hex()}  # compresses little: the members are indexed
    plain = tmp_path / "trace.json"
    plain.write_bytes(orjson.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, option=orjson.OPT_INDENT_2))
    indexed = tmp_path / "trace.json.gz"
    indexed.write_bytes(_members(plain.read_bytes(), 200_000))
    for name in ("STREAM_PART_BYTES", "MAX_PART_BYTES", "MIN_PART_BYTES"):
        monkeypatch.setattr(ingest, name, 256 << 10)
    cuts, sizes = [], []
    by_member = event_array.stream_member_parts
    monkeypatch.setattr(event_array, "stream_member_parts", lambda *a: cuts.append(a) or by_member(*a))
    memory = streamed_parts.anonymous_memory
    monkeypatch.setattr(streamed_parts, "anonymous_memory", lambda size: sizes.append(size) or memory(size))
    rows = []
    for path in (plain, indexed):
        con = duckdb.connect()
        con.execute("SET threads = 4")
        header = ingest.ingest_trace(con, path)
        rows.append(_events(con))
    assert cuts and header.keys == {"displayTimeUnit": "ms"}
    assert max(sizes) > 3 << 20, "the part moved to a buffer larger than its member's"
    assert rows[1] == rows[0] and len(rows[0]) == 3000


@pytest.fixture(scope="module")
def indexed_gpt2(tmp_path_factory):
    data = _members(gzip.decompress(GPT2.read_bytes()), 200_000)
    with open(tmp_path_factory.mktemp("indexed") / "trace.json.gz", "wb") as out:
        out.write(data)
    with open(out.name, "rb") as raw:
        found = members_of(raw.fileno())
    return out.name, data, found


def _one_sentence(path, exc: BadInputError) -> str:
    text = str(exc)
    assert "\n" not in text and text.startswith(f"{path}: ")
    return text


def test_a_corrupt_member_is_one_sentence(indexed_gpt2, tmp_path):
    _, data, found = indexed_gpt2
    bad = bytearray(data)
    middle = found[3]
    bad[middle.offset + middle.length // 2] ^= 0x55
    path = tmp_path / "corrupt.json.gz"
    path.write_bytes(bad)
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    assert "cannot be decompressed" in _one_sentence(path, raised.value)


@pytest.mark.parametrize("delta", [-1, 1], ids=["says fewer", "says more"])
def test_a_member_whose_trailer_lies_about_its_size_is_one_sentence(indexed_gpt2, tmp_path, delta):
    """A member decompresses to at most what its trailer says (a bomb stops there), and to no less."""
    _, data, found = indexed_gpt2
    bad = bytearray(data)
    member = found[2]
    end = member.offset + member.length
    bad[end - 4 : end] = (member.size + delta).to_bytes(4, "little")
    path = tmp_path / "lying.json.gz"
    path.write_bytes(bad)
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    assert "cannot be decompressed" in _one_sentence(path, raised.value)


def test_a_truncated_file_of_members_is_one_sentence(indexed_gpt2, tmp_path):
    _, data, found = indexed_gpt2
    path = tmp_path / "truncated.json.gz"
    path.write_bytes(data[: found[4].offset + HEADER_BYTES + 100])
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    assert "cannot be decompressed or read" in _one_sentence(path, raised.value)


def test_a_bomb_of_indexed_members_is_refused_within_the_limits(tmp_path):
    """Members of 1 MiB of blanks (1000x smaller compressed) say more than MAX_RATIO times their size: not trusted
    to size the limits, read as a stream; and members that do not compress as much still stop at the limits."""
    head, tail = _members(b'{"traceEvents": [', 1 << 20), _members(b"{}]}", 1 << 20)
    blanks = _members(b" " * (1 << 20), 1 << 20)
    bomb = tmp_path / "blanks.json.gz"
    bomb.write_bytes(head + blanks * 2000 + tail)
    with open(bomb, "rb") as raw:
        assert members_of(raw.fileno()) is None, "a ratio past MAX_RATIO"
    event = os.urandom(512).hex().encode()
    spaced = _members(b" " * (16 << 10) + b'{"ph": "i", "name": "' + event + b'"}, ', 1 << 20)
    bomb = tmp_path / "spaced.json.gz"
    bomb.write_bytes(head + spaced * 12_000 + tail)
    with open(bomb, "rb") as raw:
        assert len(members_of(raw.fileno())) == 12_002
    with pytest.raises(BadInputError, match=r"spaced\.json\.gz: decompresses to more than 183 MiB of JSON, more than"):
        load_run(bomb, memory_limit="64MB", disk_limit="32MB")


@pytest.mark.parametrize("tail", [b"\n", b"\r\n", b" \t \n", b"\0\0\n", b"\n" * 3])
@pytest.mark.parametrize("members", ["one member", "indexed members"])
@pytest.mark.usefixtures("reader")
def test_blanks_after_the_last_member_are_left_out(indexed_gpt2, tmp_path, tail, members):
    """Whitespace after the gzip data (a newline a text tool or a transfer appended), zeros before it or not, holds
    nothing: the trace loads as without it, on either reader, where GNU gzip and Python's gzip give up. The members
    are whole and checked (their CRCs and sizes), so no data is lost unseen."""
    data = indexed_gpt2[1] if members == "indexed members" else GPT2.read_bytes()
    path = tmp_path / "blank_tail.json.gz"
    path.write_bytes(data + tail)
    if members == "indexed members":  # still decoded member by member, in parallel: the blanks follow the chain
        with open(path, "rb") as raw:
            assert members_of(raw.fileno()) == indexed_gpt2[2]
    with load_run(GPT2) as run:
        expected = run.profiling_df()[["event_id", "module_name", "function_name", "op", "kernel_us"]]
    with load_run(path) as run:
        assert_matches_reference(run, path)
        assert run.profiling_df()[expected.columns].equals(expected)


def test_a_trailer_that_ends_in_whitespace_is_told_from_the_blanks_after_it_in_one_decoding(tmp_path, monkeypatch):
    """The last bytes of a member are its size (ISIZE): a JSON of 0x0a0a0a bytes ends its trailer in b"\\n\\n\\n\\0",
    blanks all, so the member's end is not in the bytes, only in its decoding. With a newline after it the trace
    loads as without it, decoded once: the decoder says where the member ends, and the second decoding that looked
    for it (bytes_after_members, left to the error path) is not made."""
    text = gzip.decompress((REPO / "sample_traces" / "mlp" / "trace.json.gz").read_bytes())
    text += b" " * (0x0A0A0A - len(text))
    data = gzip.compress(text)
    assert data.endswith(b"\n\n\n\0")
    path = tmp_path / "trailer_blanks.json.gz"
    path.write_bytes(data + b"\n")
    decoders = []
    monkeypatch.setattr(event_array, "bytes_after_members", lambda fd: pytest.fail("decoded a second time"))
    with load_run(REPO / "sample_traces" / "mlp" / "trace.json.gz") as run:
        expected = run.profiling_df()[["module_name", "function_name", "op", "kernel_us"]]
    real = gzip_blank_tail._zlib.decompressobj
    monkeypatch.setattr(gzip_blank_tail._zlib, "decompressobj", lambda *a: decoders.append(a) or real(*a))
    with load_run(path) as run:
        assert run.profiling_df()[expected.columns].equals(expected)
    assert decoders == [(31,)]


@pytest.mark.parametrize(
    "tail", [b"GARBAGE!", b"x", b"\nx", b"GARBAGEGARBAGE", b'{"traceEvents": []}', b" " * (3 << 20) + b"\0x"]
)
def test_bytes_after_a_file_of_members_say_where_the_members_end(indexed_gpt2, tmp_path, tail):
    """Bytes after the last member, even fewer than a gzip header (which readers only call data ending early), are
    named with the offset where they begin, past the blanks before them (which alone would be read past): the chain
    no longer ends at the file's end, so it is read as one stream, and the sentence is the same as for a file of one
    member."""
    _, data, _ = indexed_gpt2
    path = tmp_path / "tail.json.gz"
    path.write_bytes(data + tail)
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    garbage = tail.lstrip(b" \t\r\n\0")
    shown = f"{garbage[:8]!r}{'…' if len(garbage) > 8 else ''}"
    offset = len(data) + len(tail) - len(garbage)
    where = f"bytes after a gzip member at byte {offset}, {shown}, are not gzip: garbage after the data"
    assert _one_sentence(path, raised.value) == f"{path}: cannot be decompressed or read ({where})"
