"""Ingest: a trace cut into parts loads exactly as in one piece, whatever the cuts hit."""

import gzip

import duckdb
import orjson
import pytest
from conftest import REPO
from kernelscope.analyzer import event_array, ingest

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


@pytest.mark.parametrize("in_memory", [True, False], ids=["memory", "files"])
def test_streamed_parts_outgrow_their_buffers(plain_gpt2, monkeypatch, in_memory):
    """Parts far larger than their buffers' first size, decompressed in small reads: the buffers grow, and
    the parts still hold every byte of the array exactly once."""
    monkeypatch.setattr(event_array, "CHUNK", 4096)
    monkeypatch.setattr(event_array, "MAX_BUFFER_BYTES", 1024)
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
