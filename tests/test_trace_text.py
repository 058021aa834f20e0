"""The text of a trace as its writer wrote it (analyzer/json_text.py): a byte that is not UTF-8 reads as U+FFFD and a
raw control character inside a string as itself, wherever in the trace they stand and whichever reader reads them,
with a note; a quote that ends a string early or a backslash that starts no escape is refused, saying where."""

import gzip
import json

import pytest
from conftest import REPO
from kernelscope.analyzer import ingest, load_run
from kernelscope.analyzer.errors import BadInputError
from reference import assert_matches_reference

MLP = REPO / "sample_traces" / "mlp" / "trace.json.gz"  # 6 kernels; deviceProperties before traceEvents
TEXT = gzip.decompress(MLP.read_bytes())
KERNEL = b'"name": "nvjet'  # the name of a kernel, in traceEvents[31]
ARRAY = TEXT[TEXT.index(b"[", TEXT.index(b'"traceEvents"')) : TEXT.rindex(b"]") + 1]
NOT_UTF8 = "{}: holds {} byte{} that {} not UTF-8, read as U+FFFD (\ufffd)"
CONTROLS = (
    "{}: holds {} control characters (a tab, a newline…) written raw inside strings, where JSON escapes them, read"
    " as the characters they are"
)


def _write(tmp_path, data: bytes, compressed: bool, name: str = "trace"):
    path = tmp_path / (f"{name}.json.gz" if compressed else f"{name}.json")
    path.write_bytes(gzip.compress(data) if compressed else data)
    return path


@pytest.fixture(params=["native", "duckdb"])
def reader(request, monkeypatch):
    """Each reader of the parts: the native one (which leaves such parts to DuckDB's), or DuckDB's alone."""
    if request.param == "duckdb":
        monkeypatch.setattr(ingest, "native_reader", None)
    return request.param


@pytest.fixture(params=[None, 4 << 10], ids=["one part", "parts of 4 KiB"])
def parts(request, monkeypatch):
    if request.param is not None:
        for name in ("MIN_PART_BYTES", "MAX_PART_BYTES", "STREAM_PART_BYTES"):
            monkeypatch.setattr(ingest, name, request.param)


PLACES = {  # where the text is: the header before traceEvents, the keys after it, a bare array, a document parsed
    # whole because a key after traceEvents holds an array
    "header": lambda t, s: t.replace(b'"NVIDIA H200"', b'"NVIDIA ' + s + b'H200"', 1),
    "trace name": lambda t, s: t.replace(b'"traceName": "', b'"traceName": "' + s, 1),
    "event": lambda t, s: t.replace(KERNEL, KERNEL[:-5] + s + KERNEL[-5:], 1),
    "bare array": lambda t, s: ARRAY.replace(KERNEL, KERNEL[:-5] + s + KERNEL[-5:], 1),
    "parsed whole": lambda t, s: t.replace(KERNEL, KERNEL[:-5] + s + KERNEL[-5:], 1).replace(
        b'"traceName"', b'"steps": [1, 2], "traceName"', 1
    ),
}


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("place", PLACES)
def test_bytes_not_utf8_read_as_replacement_characters_wherever_they_stand(tmp_path, place, compressed, reader):
    """torch 1.8 wrote garbage bytes in names (pytorch/kineto#80); Latin-1 text, a character cut short: each byte
    reads as U+FFFD, in the keys around traceEvents as in its events, in a trace streamed or parsed whole."""
    path = _write(tmp_path, PLACES[place](TEXT, b"caf\xe9 \xe2\x82"), compressed)
    with load_run(path) as run:
        assert_matches_reference(run, path)
        assert len(run.profiling_df()) == 6
        assert run.notes() == [NOT_UTF8.format(path, 3, "s", "are")]
        if place in ("event", "bare array", "parsed whole"):
            assert run.profiling_df()["kernel"].str.startswith("caf\ufffd \ufffd\ufffdnvjet").sum() == 1


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("place", PLACES)
def test_raw_control_characters_in_strings_read_as_themselves(tmp_path, place, compressed, reader, parts):
    """A Python frame's source line in a with_stack name brings its raw newline and tabs (pytorch/pytorch#113001):
    read as the characters, as Python's json (strict=False) reads them, by both readers, with a note."""
    path = _write(tmp_path, PLACES[place](TEXT, b"a\tb\nc\x01"), compressed)
    with load_run(path) as run:
        assert_matches_reference(run, path)
        assert len(run.profiling_df()) == 6
        assert run.notes() == [CONTROLS.format(path, 3)]
        if place in ("event", "bare array", "parsed whole"):
            assert run.profiling_df()["kernel"].str.startswith("a\tb\nc\x01nvjet").sum() == 1


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("place", PLACES)
def test_escapes_of_lone_surrogates_read_as_replacement_characters(tmp_path, place, compressed, reader, parts):
    """JSON's grammar allows any \\uXXXX, but a lone UTF-16 surrogate names no character, and orjson and DuckDB refuse
    it: each reads as U+FFFD, a pair stays its character, an escaped backslash before "ud800" escapes nothing."""
    lone = rb"\ud800a\udc00\ud83d\ude00\\ud800\udbff"
    path = _write(tmp_path, PLACES[place](TEXT, lone), compressed)
    with load_run(path) as run:
        assert_matches_reference(run, path)
        assert len(run.profiling_df()) == 6
        assert run.notes() == [
            f"{path}: holds 3 escapes of lone UTF-16 surrogates (\\ud800…) in strings, which name no character, read"
            " as U+FFFD (\ufffd)"
        ]
        if place in ("event", "bare array", "parsed whole"):
            named = "\ufffda\ufffd\U0001f600\\ud800\ufffdnvjet"
            assert run.profiling_df()["kernel"].str.startswith(named).sum() == 1


def test_a_trace_cut_again_counts_its_bytes_once(tmp_path, monkeypatch):
    """A cut that falls inside an event (between two objects of a list in its args) has the trace read again as one
    part: the bytes of the parts read before are counted once, not once a try."""
    for name in ("MIN_PART_BYTES", "MAX_PART_BYTES", "STREAM_PART_BYTES"):
        monkeypatch.setattr(ingest, name, 4 << 10)
    first = TEXT.index(b'"name": "') + len(b'"name": "')
    text = TEXT[:first] + b"caf\xe9" + TEXT[first:]
    args = b'"args": {' + b'"list": [' + b", ".join(b'{"a": %d}' % i for i in range(3000)) + b"], "
    text = text[: len(text) // 2] + text[len(text) // 2 :].replace(b'"args": {', args, 1)
    path = _write(tmp_path, text, False)
    with load_run(path) as run:
        assert_matches_reference(run, path)
        assert run.notes() == [NOT_UTF8.format(path, 1, "", "is")]


QUOTE = 'an unescaped quote (") inside a string, which ends it early'
ESCAPE = "a backslash that starts no JSON escape (\\c) inside a string (JSON writes \\\\)"


@pytest.mark.parametrize("whole", [True, False], ids=["parsed whole", "too large to parse whole"])
@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize(
    "written, what, shift",
    [
        (b'x"y', QUOTE, 1),  # pytorch/kineto#1459: a with_stack name holding quotes
        (b"C:\\\\torch\\cuda", ESCAPE, 9),  # pytorch/pytorch#98432: a Windows path, its backslashes bare
        (b'x" "y', "a quote, then another string without a comma or colon between them", 1),
    ],
    ids=["quote", "backslash", "two strings"],
)
def test_a_string_that_breaks_json_is_refused_saying_where(
    tmp_path, monkeypatch, written, what, shift, compressed, whole
):
    """No repair is guessed: the message says what and where (the byte, and the event), so that the file can be
    mended; a trace too large to parse whole is searched for it as its one part."""
    if not whole:
        monkeypatch.setattr(ingest, "WHOLE_PARSE_LIMIT", 1000)
    text = TEXT.replace(KERNEL, KERNEL[:-5] + written + KERNEL[-5:], 1)
    offset = TEXT.index(KERNEL) + len(KERNEL) - 5 + shift
    path = _write(tmp_path, text, compressed)
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    where = f"byte {offset}{' of the JSON it decompresses to' if compressed else ''} in traceEvents[31]"
    assert str(raised.value) == f"{path}: is not valid JSON ({what}, at {where})"


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize(
    "text",
    [
        b"\xef\xbb\xbf" + TEXT,  # a byte order mark an editor put before it
        TEXT.replace(b"\n", b"\r\n"),  # saved with Windows' line ends
        TEXT + b"\n\n",
        ARRAY.replace(b"\n", b"\r\n"),
    ],
    ids=["byte order mark", "CRLF", "blank lines after it", "bare array, CRLF"],
)
def test_text_an_editor_saved_loads(tmp_path, text, compressed, reader):
    path = _write(tmp_path, text, compressed)
    with load_run(path) as run:
        assert_matches_reference(run, path)
        assert len(run.profiling_df()) == 6 and run.notes() == []


def test_a_gzip_trace_with_a_newline_after_it_loads_and_one_with_more_after_it_is_refused(tmp_path, reader):
    """A newline after the last member (`echo >> t.gz`, a transfer in text mode) holds nothing and is left out, as
    the zeros gzip readers skip are (tests/test_gzip_members.py tries more); anything else after it is bytes after
    the data that gzip readers refuse: the message says where they begin, past the newline, and what they are."""
    path = tmp_path / "trace.json.gz"
    path.write_bytes(MLP.read_bytes() + b"\n")
    with load_run(path) as run:
        assert_matches_reference(run, path)
        assert len(run.profiling_df()) == 6 and run.notes() == []
    path.write_bytes(MLP.read_bytes() + b"\n{}")
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    assert str(raised.value) == (
        f"{path}: cannot be decompressed or read (bytes after a gzip member at byte {MLP.stat().st_size + 1}, b'{{}}',"
        " are not gzip: garbage after the data)"
    )


@pytest.mark.parametrize("size", [256, 80 << 20], ids=["small", "larger than a document parsed whole"])
@pytest.mark.parametrize("name", ["report.nsys-rep", "profile.qdrep"])
def test_an_nsight_systems_report_is_named(tmp_path, name, size):
    path = tmp_path / name
    with open(path, "wb") as out:
        out.write(b"\x00\x01NSYS\xff\xfe" + bytes(range(256)) * (size // 256))
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    assert str(raised.value) == (
        f"{path}: is not valid JSON (it is an Nsight Systems report, not a torch.profiler trace: record the model"
        " with torch.profiler (export_chrome_trace), or export the report with nsys export --type json/sqlite for"
        " Nsight's own tools)"
    )


def _each(cat, change):
    def edit(doc):
        for e in doc["traceEvents"]:
            if e.get("ph") == "X" and (cat is None or e.get("cat") == cat):
                change(e)

    return edit


SHAPES = {  # what third-party writers and hands do to a trace, which changes no row
    "ts and dur as strings": _each(None, lambda e: e.update(ts=str(e["ts"]), dur=str(e["dur"]))),
    # every span's: a thread written "887" is not the thread written 887 (test_chrome_shapes.py)
    "pid and tid as strings of digits": _each(None, lambda e: e.update(pid=str(e["pid"]), tid=str(e["tid"]))),
    "args null on operators": _each("cpu_op", lambda e: e.update(args=None)),
    "integer microseconds": _each(None, lambda e: e.update(ts=int(e["ts"]))),
    "operators listed twice": lambda doc: doc["traceEvents"].extend(
        [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"][:3]
    ),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_trace_of_another_shape_reads_the_same_by_both_readers(tmp_path, shape, reader):
    doc = json.loads(TEXT)
    SHAPES[shape](doc)
    path = _write(tmp_path, json.dumps(doc).encode(), False)
    with load_run(path) as run, load_run(MLP) as original:
        assert_matches_reference(run, path)
        columns = ["kernel", "op", "function_name", "kernel_us"]
        assert run.profiling_df()[columns].equals(original.profiling_df()[columns])


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "gzip"])
def test_trace_events_one_per_line_are_named_as_json_lines_not_as_traces_concatenated(tmp_path, compressed):
    """A file of trace events one JSON object per line (as some tools log them): not several traces concatenated, which
    the message said before, but events that a trace holds in one array."""
    events = json.loads(ARRAY)
    path = _write(tmp_path, b"\n".join(json.dumps(e).encode() for e in events), compressed)
    with pytest.raises(BadInputError) as refused:
        load_run(path)
    assert str(refused.value) == (
        f"{path}: holds one JSON object per line (JSON Lines), the second at line 2 column 1, each a trace event: a"
        ' trace holds its events in one array ([{…}, {…}] or {"traceEvents": [{…}, {…}]})'
    )
