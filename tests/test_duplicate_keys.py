"""A key given twice in a trace (docs/errors.md): JSON says nothing of which value counts, so the rule is one for
every reader and path. A key ingest reads (ph, cat, name, pid, tid, ts, dur, args) twice in an event is refused,
naming the event; other keys of an event, and those inside args, are kept as written, and a join key read from args
is its first value (DuckDB's JSON functions read the first; the native reader leaves such parts to DuckDB); a second
top-level traceEvents is refused. Plain, gzip, bare arrays and traces too large to parse whole agree."""

import gzip
import json

import pytest
from test_bad_input import EVENTS, K
from test_native_reader import _read_natively, _read_with_duckdb

KERNEL_NAME = EVENTS["traceEvents"][K]["name"]
REST = json.dumps({key: value for key, value in EVENTS.items() if key != "traceEvents"})[1:-1]


def _kernel_with(tmp_path, name, inserted, *, bare=False, compressed=False):
    """RUN's trace with ``inserted`` (JSON text of keys) put first in its first kernel's object (its other keys before
    traceEvents, where a trace larger than 64 MiB must have those that hold arrays)."""
    events = json.dumps(EVENTS["traceEvents"])
    kernel = json.dumps(EVENTS["traceEvents"][K])
    events = events.replace(kernel, "{" + inserted + ", " + kernel[1:], 1)
    text = (events if bare else "{" + REST + ', "traceEvents": ' + events + "}").encode()
    path = tmp_path / (name + (".json.gz" if compressed else ".json"))
    path.write_bytes(gzip.compress(text) if compressed else text)
    return path


LAYOUTS = {
    "object": {},
    "bare array (parsed whole)": {"bare": True},
    "gzip": {"compressed": True},
}


@pytest.mark.parametrize("large", [False, True], ids=["parsed whole if need be", "too large to parse whole"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("inserted", ['"ts": "soon"', '"ts": 1', '"name": "other"'], ids=["bad", "good", "name"])
def test_a_key_ingest_reads_twice_in_an_event_is_refused_naming_the_event(
    inserted, layout, large, tmp_path, monkeypatch
):
    """The first value bad and the second good, or both good: refused alike, whichever reader and path read it
    (before, a trace small enough to parse whole loaded with the last value, and a bare array always did)."""
    from kernelscope.analyzer import BadInputError, ingest, load_run

    if large:
        monkeypatch.setattr(ingest, "WHOLE_PARSE_LIMIT", 0)
    path = _kernel_with(tmp_path, "twice", inserted, **LAYOUTS[layout])
    key = inserted.split('"')[1]
    name = "other" if key == "name" else KERNEL_NAME
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    assert str(raised.value) == f"{path}: traceEvents[{K}] (kernel {name!r}) has the key {key!r} twice"


def _correlations(path):
    from kernelscope.analyzer import load_run

    with load_run(path) as run:
        return run.sql(f"SELECT correlation FROM events WHERE event_id = {K}").iat[0, 0]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_join_key_twice_in_args_is_its_first_value_on_every_path(layout, tmp_path):
    """args holding correlation twice: the first counts, in a streamed part (left by the native reader to DuckDB)
    and in a bare array parsed whole (whose parsed object kept the last)."""
    kernel = EVENTS["traceEvents"][K]
    correlation = kernel["args"]["correlation"]
    events = json.dumps(EVENTS["traceEvents"])
    original = json.dumps(kernel)
    twice = original.replace(f'"correlation": {correlation}', f'"correlation": {correlation}, "correlation": 99', 1)
    text = events.replace(original, twice, 1)
    doc = text if LAYOUTS[layout].get("bare") else '{"traceEvents": ' + text + ", " + REST + "}"
    path = tmp_path / ("trace.json.gz" if LAYOUTS[layout].get("compressed") else "trace.json")
    path.write_bytes(gzip.compress(doc.encode()) if LAYOUTS[layout].get("compressed") else doc.encode())
    assert _correlations(path) == correlation


@pytest.mark.parametrize(
    "part",
    [
        '[{"ph": "X", "id": 1, "id": 2, "args": {"a": 1, "a": {"b": 1, "b": 2}}}]',
        '[{"ph": "X", "args": {"correlation": 5, "correlation": 6, "stream": 7}}]',
        '[{"ph": "X", "ts": 5, "ts": 6}]',
        '[{"ph": "X", "ts": "soon", "ts": 6}]',
    ],
)
def test_both_readers_read_a_key_twice_alike_or_the_native_one_leaves_it(part, tmp_path):
    """Keys ingest does not read, twice, are kept as written by both readers; a join key or an event key it reads,
    twice, the native reader leaves to DuckDB, which reads the join key's first value and refuses the event key."""
    native, duckdb_rows = _read_natively(part.encode()), _read_with_duckdb(part.encode(), tmp_path)
    if native.startswith("left: ") if isinstance(native, str) else False:
        if native != "left: a join key twice in args":  # a key twice in an event, or its first value unread
            assert duckdb_rows.startswith("error: "), duckdb_rows
        else:
            assert duckdb_rows[0][8] == 5, duckdb_rows  # correlation
    else:
        assert native == duckdb_rows


def _two_arrays(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


EVENTS_TEXT = json.dumps(EVENTS["traceEvents"])
E, R = EVENTS_TEXT, REST
TWO_ARRAYS = {
    "a second, empty, after the keys": f'{{"traceEvents": {E}, {R}, "traceEvents": []}}',
    "the first a number": f'{{"traceEvents": 5, {R}, "traceEvents": {E}}}',
    "the second a number": f'{{"traceEvents": {E}, {R}, "traceEvents": 5}}',
    "the first empty": f'{{"traceEvents": [], {R}, "traceEvents": {E}}}',
    "the trace's twice": f'{{"traceEvents": {E}, "traceEvents": {E}}}',
}


@pytest.mark.parametrize("case", TWO_ARRAYS)
def test_a_second_top_level_trace_events_is_refused(case, tmp_path):
    """The streamed cut reads the first traceEvents, a parsed object keeps the last: neither may silently win."""
    from kernelscope.analyzer import BadInputError, load_run

    path = _two_arrays(tmp_path, "two.json", TWO_ARRAYS[case])
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    assert str(raised.value) == (
        f'{path}: has two traceEvents arrays (the key "traceEvents" twice in the trace object): which is the trace'
        " is not known"
    )


def test_a_key_named_trace_events_inside_another_is_no_second_array(tmp_path):
    from kernelscope.analyzer import load_run

    text = f'{{{R}, "x": {{"traceEvents": 1}}, "traceEvents": {E}, "y": ["traceEvents"]}}'
    with load_run(_two_arrays(tmp_path, "one.json", text)) as run:
        assert run.sql("SELECT count(*) FROM events").iat[0, 0] == len(EVENTS["traceEvents"])
