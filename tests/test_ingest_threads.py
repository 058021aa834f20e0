"""Where the ingest's parts load: a trace of one part on the calling thread, which would only wait for a pool
thread's load; a trace of several on the pool, while the next parts are cut."""

import gzip
import threading

import duckdb
import pytest
from conftest import REPO
from kernelscope.analyzer import ingest

GPT2 = REPO / "sample_traces" / "gpt2" / "trace.json.gz"
LOAD_PART = ingest._load_part


def _threads_loading(path, monkeypatch) -> list[threading.Thread]:
    """The thread each part of ``path`` loaded on, in order."""
    threads = []
    monkeypatch.setattr(ingest, "_load_part", lambda *a: threads.append(threading.current_thread()) or LOAD_PART(*a))
    con = duckdb.connect()
    ingest.ingest_trace(con, path)
    assert con.execute("SELECT count(*) FROM events").fetchone()[0] > 0
    return threads


@pytest.fixture(scope="module", params=["gzip", "plain"])
def gpt2(request, tmp_path_factory):
    if request.param == "gzip":
        return GPT2
    path = tmp_path_factory.mktemp("plain") / "trace.json"
    path.write_bytes(gzip.decompress(GPT2.read_bytes()))
    return path


def test_a_trace_of_one_part_loads_on_the_calling_thread(gpt2, monkeypatch):
    assert _threads_loading(gpt2, monkeypatch) == [threading.current_thread()]


def test_a_trace_of_several_parts_loads_them_on_the_pool(gpt2, monkeypatch):
    size = len(gzip.decompress(GPT2.read_bytes()))
    for name in ("MIN_PART_BYTES", "MAX_PART_BYTES", "STREAM_PART_BYTES"):
        monkeypatch.setattr(ingest, name, size // 4)
    threads = _threads_loading(gpt2, monkeypatch)
    assert len(threads) > 1
    assert all(thread.name.startswith("kernelscope-ingest") for thread in threads)


def test_a_failing_part_on_the_calling_thread_is_the_same_refusal(tmp_path):
    """A part's failure, raised on the calling thread, is settled as a pool thread's was: the trace is refused."""
    from kernelscope.analyzer import BadInputError

    path = tmp_path / "trace.json"
    path.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": }]}')
    with pytest.raises(BadInputError, match="trace.json"):
        ingest.ingest_trace(duckdb.connect(), path)
