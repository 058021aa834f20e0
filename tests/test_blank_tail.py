"""Blanks before and after a trace's JSON (analyzer/json_blank_tail.py): whitespace and zeros in any amount, plain or
gzip, inside the compressed JSON or after its members, leave the trace as it is; a byte that is not blank after
them is refused, saying where it stands."""

import gzip
import io
import random

import pytest
from conftest import REPO
from kernelscope.analyzer import event_array, json_blank_tail, load_run
from kernelscope.analyzer.errors import BadInputError
from kernelscope.analyzer.json_blank_tail import HeldBlanks, content_end
from reference import assert_matches_reference

MLP = REPO / "sample_traces" / "mlp" / "trace.json.gz"
TEXT = gzip.decompress(MLP.read_bytes())
ARRAY = TEXT[TEXT.index(b"[", TEXT.index(b'"traceEvents"')) : TEXT.rindex(b"]") + 1]
TAIL = b" \r\n\t\0" * (600 << 10)  # 3 MiB: more than the 1 MiB the end of the JSON is searched in


def _loads_as_mlp(path):
    with load_run(path) as run:
        assert_matches_reference(run, MLP)
        assert len(run.profiling_df()) == 6


@pytest.mark.parametrize(
    "how",
    ["after the JSON", "zeros after the JSON", "after a bare array", "after the gzip member", "before the JSON"],
)
@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_blanks_around_a_trace_in_any_amount_leave_it_as_it_is(tmp_path, monkeypatch, how, compressed):
    monkeypatch.setattr(event_array, "HEAD_LIMIT", 1 << 20)  # blanks before the document past the head's limit
    text = {
        "after the JSON": TEXT + TAIL,
        "zeros after the JSON": TEXT + bytes(3 << 20),  # space a writer reserved and never wrote
        "after a bare array": ARRAY + TAIL,
        "after the gzip member": TEXT,
        "before the JSON": b"\r\n" * (1 << 20) + TEXT,
    }[how]
    data = gzip.compress(text) if compressed else text
    if how == "after the gzip member":
        data += TAIL if compressed else b"\n" * (3 << 20)
    path = tmp_path / ("trace.json.gz" if compressed else "trace.json")
    path.write_bytes(data)
    _loads_as_mlp(path)


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_a_byte_after_blanks_after_the_trace_is_refused_naming_where_it_stands(tmp_path, compressed):
    text = TEXT + b"\n" * 5 + b"x"
    path = tmp_path / ("trace.json.gz" if compressed else "trace.json")
    path.write_bytes(gzip.compress(text) if compressed else text)
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    where = f"trailing data at byte {len(TEXT) + 5}{' of the JSON it decompresses to' if compressed else ''}"
    where += ", after the trace object"
    assert str(raised.value) == f"{path}: is not valid JSON ({where})"


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_a_word_after_megabytes_of_blanks_after_a_trace_is_refused_naming_where_it_stands(tmp_path, compressed):
    """More blanks than the 1 MiB the end of the trace object is searched in, then a word: it is trailing data, not a
    trace cut short."""
    text = TEXT + b" \r\n\t" * (768 << 10) + b"xyz"
    path = tmp_path / ("trace.json.gz" if compressed else "trace.json")
    path.write_bytes(gzip.compress(text) if compressed else text)
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    where = f"trailing data at byte {len(text) - 3}{' of the JSON it decompresses to' if compressed else ''}"
    assert str(raised.value) == f"{path}: is not valid JSON ({where}, after the trace object)"


def _held(data: bytes, read_bytes: int) -> bytes:
    stream = HeldBlanks(io.BufferedReader(io.BytesIO(data), 7))
    out = bytearray()
    while True:
        chunk = bytearray(read_bytes)
        count = stream.readinto(chunk)
        if not count:
            return bytes(out)
        out += chunk[:count]


@pytest.mark.parametrize("seed", range(40))
def test_held_blanks_hand_out_every_byte_but_the_blanks_at_the_end(monkeypatch, seed):
    """Runs of blanks of every length, held or not, compressed past the limit or not, read in pieces of every size:
    what is read is the stream as it was, but the blanks at its end where they run past the holding length."""
    monkeypatch.setattr(json_blank_tail, "HOLD_FROM", 16)
    monkeypatch.setattr(json_blank_tail, "MAX_HELD_BYTES", 40)
    rng = random.Random(seed)
    pieces = []
    for _ in range(rng.randrange(1, 12)):
        blank = bytes(rng.choice(b" \t\r\n\0") for _ in range(rng.choice([1, 5, 20, 100, 400])))
        pieces += [blank if rng.random() < 0.5 else blank[:1] * len(blank), b"x" * rng.randrange(0, 30)]
    data = b"".join(pieces)
    kept = data.rstrip(b" \t\r\n\0")
    out = _held(data, rng.choice([1, 3, 64, 1000]))
    assert data.startswith(out) and out.startswith(kept)
    assert len(data) - len(out) in ((0,) if len(data) - len(kept) <= 16 else range(len(data) - len(kept) - 64, 10**6))


def test_a_plain_file_is_searched_from_its_end_past_its_blanks(tmp_path):
    path = tmp_path / "t"
    path.write_bytes(b"{}" + b"\0" * (5 << 20) + b" \n")
    with open(path, "rb") as raw:
        assert content_end(raw.fileno(), path.stat().st_size) == 2
        assert content_end(raw.fileno(), 1) == 1


def test_the_end_of_a_trace_cut_short_is_searched_in_linear_work(monkeypatch):
    """A tail of thousands of events holding arrays, cut short: each of its "]"s is tried as the array's end, and
    each try reads only up to its first fault, so the bytes parsed stay a small multiple of the tail's (reading all
    that follows each "]", with the lenient reading on each failure, took many seconds on a 1 MiB tail)."""
    import orjson
    from kernelscope.analyzer import trace_parts

    event = b'{"ph": "X", "name": "aten::add", "args": {"Input Dims": [[8, 64], [8, 64], []]}, "ts": 1.5}'
    tail = b", ".join([event] * 10000)[:-20]
    parsed = []
    real = orjson.loads
    monkeypatch.setattr(orjson, "loads", lambda data: parsed.append(len(data)) or real(data))
    with pytest.raises(BadInputError, match="the JSON ends before the trace object is complete"):
        trace_parts.find_array_end(REPO / "t.json", tail, 0)
    assert len(parsed) > 10000 and sum(parsed) < 20 * len(tail)


@pytest.mark.parametrize(
    ("name", "data", "problem"),
    [
        ("zeros.json", b"\0" * (1 << 20), "holds no JSON: only blanks (whitespace, zero bytes)"),
        ("marked.json", b"\xef\xbb\xbf \n", "holds no JSON: only blanks (whitespace, zero bytes)"),
        (
            "empty.json.gz",
            gzip.compress(b"") * 3,
            "decompresses to no JSON: nothing, or only blanks (whitespace, zero bytes)",
        ),
        (
            "zeros.json.gz",
            gzip.compress(b"\0" * (8 << 20), 1),
            "decompresses to no JSON: nothing, or only blanks (whitespace, zero bytes)",
        ),
    ],
    ids=["zeros", "a byte order mark and blanks", "empty gzip members", "a gzip member of zeros"],
)
def test_a_trace_of_blanks_only_says_so(name, data, problem, tmp_path):
    """A file of zeros (space reserved and never written), or gzip members of nothing, were 'is not valid JSON
    (Input is a zero-length, empty document: line 1 column 1 (char 0))', orjson's words for what blanks left."""
    (tmp_path / name).write_bytes(data)
    with pytest.raises(BadInputError) as caught:
        load_run(tmp_path / name)
    assert str(caught.value) == f"{tmp_path / name}: {problem}"
