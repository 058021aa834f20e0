"""The native Kineto reader (_kineto.c) gives exactly the rows of DuckDB's JSON reader (ingest.sql), or leaves
the part to it: on every real sample trace, and on random traces written to hit the reader's edge cases."""

import gzip
import json
import random

import duckdb
import pytest
from conftest import REPO, SHARED_TRACES
from kernelscope.analyzer import ingest
from kernelscope.analyzer.sql import define_scope_names, run_sql_file, sql_text

SAMPLE_TRACES = sorted((REPO / "sample_traces").glob("*/trace.json.gz")) + SHARED_TRACES  # + the H200 edge cases
SAMPLE_TRACES += sorted((REPO / "sample_traces" / "external").glob("*.json*"))  # other writers, 2021 to 2026
SAMPLE_TRACES += sorted((REPO / "tests" / "data" / "wild").rglob("*.json"))  # cut from others' traces, refused ones too


def test_the_native_reader_is_built():
    # The install builds it wherever there is a C compiler (CI has one); without it every part would go through
    # DuckDB's reader, and the comparisons below would compare that reader with itself.
    assert ingest.native_reader is not None


_CONNECTIONS: dict[str, duckdb.DuckDBPyConnection] = {}


def _connection(use: str) -> duckdb.DuckDBPyConnection:
    """A connection with an empty ``events`` table: one per use for the whole module, as a connection costs
    many times what reading a small part does (events.sql replaces the table)."""
    if use not in _CONNECTIONS:
        _CONNECTIONS[use] = duckdb.connect()
    run_sql_file(_CONNECTIONS[use], "events.sql")
    return _CONNECTIONS[use]


def _read_with_duckdb(part: bytes, tmp_path) -> list[tuple] | str:
    """The rows ingest.sql gives for a part, or DuckDB's error."""
    file = tmp_path / "part.json"
    file.write_bytes(part)
    con = _connection("duckdb")
    try:
        literals = {"first_id": str(7 << 40), "rank": "0", "object_bytes": str(1 << 24)}
        run_sql_file(con, "ingest.sql", events_file=str(file), **literals)
    except duckdb.Error as exc:
        return f"error: {exc}"
    return con.execute("SELECT * FROM events ORDER BY event_id").fetchall()


def _read_natively(part: bytes, bare: bool = False) -> list[tuple] | str:
    """The rows the native reader gives for a part (``bare``: the events without the array's brackets), or why
    it left the part to DuckDB."""
    scanned = ingest.native_reader.scan(part, 7 << 40, bare)
    if scanned[0] is None:
        return f"left: {scanned[1]}"
    rows = _inserted(scanned).execute("SELECT * FROM events ORDER BY event_id").fetchall()
    assert len(rows) == scanned[0]
    return rows


def _inserted(scanned: tuple) -> duckdb.DuckDBPyConnection:
    """A connection whose ``events`` holds a scanned part (scan's result), inserted as ingest.py does."""
    con = _connection("native")
    con.register("scanned_part", ingest._ArrowStream(scanned[1]))
    run_sql_file(con, ingest.scanned_insert(scanned[5]), first_id="0", rank="0")
    return con


def _events_both_ways(trace, monkeypatch) -> tuple[list[tuple], list[tuple], ingest.TraceHeader]:
    query = "SELECT * FROM events ORDER BY event_id"
    native = duckdb.connect()
    header = ingest.ingest_trace(native, trace)
    with monkeypatch.context() as patch:
        patch.setattr(ingest, "native_reader", None)
        plain = duckdb.connect()
        assert ingest.ingest_trace(plain, trace).native_parts == []
    return native.execute(query).fetchall(), plain.execute(query).fetchall(), header


@pytest.mark.parametrize("trace", SAMPLE_TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_traces_read_natively_as_duckdb_reads_them(trace, monkeypatch):
    native, plain, header = _events_both_ways(trace, monkeypatch)
    assert header.duckdb_parts == [] and header.native_parts == [0]
    assert native == plain


def test_real_sample_runs_load_natively():
    from kernelscope.analyzer import load_run

    run = load_run(REPO / "sample_traces" / "gpt2")
    assert run.header.native_parts == [0] and run.header.duckdb_parts == []
    assert run.header.rows_checked == [0] and run.header.all_rows_checked  # validate.sql skips rules 1-7


# Random traces. Each value is written as JSON text, often in forms DuckDB rewrites ("1.50", "\/", "1e3"),
# so the reader must either reproduce DuckDB's rewrite or leave the part.
NUMBERS = [
    "0",
    "7",
    "-3",
    "-0",
    "12345678901234567890",
    "-9223372036854775809",
    "0.5",
    "1.50",
    "2.0",
    "100.0",
    "-0.0",
    "0.0",
    "0.000001",
    "0.0000001",
    "1e3",
    "1E-2",
    "0.1667",
    "0.3333333333333333",
    "0.33333333333333331",
    "1.7976931348623157e308",
    "123456789012345.5",
    "9007199254740993.0",
    "0.0006373486297004461",
    "0.00063734862970044610",
    "5149980606951.343",
    "1.5e0",
    "00",
    "1.",
    ".5",
    "+1",
    "1.2.3",
    "--1",
]
STRINGS = [
    '""',
    '"cpu_op"',
    '"aten::mm"',
    '"a\\"b"',
    '"a\\\\b"',
    '"x\\/y"',
    '"tab\\there"',
    '"\\b\\f\\n\\r"',
    '"\\u00e9"',
    '"é"',
    '"\\ud83d\\ude00"',
    '"12"',
    '"Spans"',
    '"-1"',
    '"bad\\q"',
    '"ctl\x01"',
    '"open',
    '"Name with spaces, commas: {}[]"',
]
LITERALS = ["true", "false", "null", "nul", "True"]


def _value(rng: random.Random, depth: int = 0) -> str:
    kind = rng.random()
    if kind < 0.35:
        return rng.choice(NUMBERS[:24] if rng.random() < 0.9 else NUMBERS)
    if kind < 0.65:
        return rng.choice(STRINGS[:14] if rng.random() < 0.9 else STRINGS)
    if kind < 0.75:
        return rng.choice(LITERALS[:3] if rng.random() < 0.95 else LITERALS)
    if depth > 2:
        return "1"
    if kind < 0.88:
        return "[" + _ws(rng).join(_ws(rng) + _value(rng, depth + 1) + "," for _ in range(rng.randrange(3)))[:-1] + "]"
    return _object(rng, ["k", "name", "correlation", "x y"], depth + 1)


def _ws(rng: random.Random) -> str:
    return rng.choice(["", "", " ", "\n    ", "\t", "  \r\n"])


def _object(rng: random.Random, keys: list[str], depth: int, values=None) -> str:
    chosen = [rng.choice(keys) for _ in range(rng.randrange(len(keys) + 1))]
    items = [f'{_ws(rng)}"{k}"{_ws(rng)}:{_ws(rng)}{(values or {}).get(k, _value)(rng, depth)}' for k in chosen]
    return "{" + ",".join(items) + _ws(rng) + "}"


# roctracer writes a launch's stream as a hexadecimal string ("0x0"); the reader reads those that are nothing else
HEX_KEYS = ['"0x0"', '"0X1F"', '"0x7fffffff"', '"0x80000000"', '"0x8000000000000000"', '"0x000000000000000000001"']
HEX_KEYS += ['"0x"', '"0x1g"', '" 0x1"', '"-0x1"']


def _join_key(rng: random.Random, depth: int) -> str:
    return rng.choice(["17", "-4", "0", "null", "2147483648", "3.0", '"5"', "true", "99999999999"] + HEX_KEYS)


def _time(rng: random.Random, depth: int) -> str:
    return rng.choice(["5149980606951.343", "12", "0.5", "-1.25", "1.2345", "1e3", "null", '"1"', "0.100"])


def _pid(rng: random.Random, depth: int) -> str:
    return rng.choice(
        ["887", "-1", "0", '"Spans"', '""', '"12"', '"stream \\"7\\""', "null", "1.5", "99999999999999999999", "true"]
    )


CATEGORIES = ['"cpu_op"', '"kernel"', '"cuda_runtime"', '"user_annotation"', '"a\\/b"']
CATEGORIES += ['"Kernel"', '"Runtime"', '"User"']  # the 2021 format's, read by their later names


def _event(rng: random.Random) -> str:
    if rng.random() < 0.01:
        return rng.choice(["1", "[]", "null", '"x"'])
    args = _object(
        rng,
        ["External id", "correlation", "device", "stream", "grid", "name", "bytes", "Ev Idx", "external id"],
        1,
        {k: _join_key for k in ("correlation", "External id", "external id", "device", "stream")},
    )
    values = {
        "ph": lambda r, d: r.choice(['"X"', '"f"', '"s"', '"M"', '"i"', '"I"', "null", "3"]),
        "cat": lambda r, d: r.choice(CATEGORIES),
        "name": lambda r, d: r.choice(STRINGS[:14] + ['"[memory]"'] if r.random() < 0.95 else STRINGS),
        "pid": _pid,
        "tid": _pid,
        "ts": _time,
        "dur": _time,
        "args": lambda r, d: args if r.random() < 0.9 else r.choice(["null", "[]", '"a"']),
        # a flow's (ph s, f): flow_id, read as pid is
        "id": lambda r, d: r.choice(["3", "1166093", '"12"', '"Spans"', "null"]) if r.random() < 0.8 else _pid(r, d),
    }
    keys = list(values) + ["bp", "s", "Ph"]
    return _object(rng, keys, 0, values)


def _random_part(rng: random.Random) -> bytes:
    events = [_event(rng) for _ in range(rng.randrange(0, 6))]
    text = "[" + ",".join(_ws(rng) + e for e in events) + _ws(rng) + "]"
    if rng.random() < 0.05:
        text = text[: rng.randrange(len(text) + 1)]
    elif rng.random() < 0.03:
        text = text.replace("}", "},", 1)
    return text.encode()


def test_random_parts_read_natively_as_duckdb_reads_them_or_are_left_to_it(tmp_path):
    rng = random.Random(20261130)
    read = left = 0
    for _ in range(1800):
        part = _random_part(rng)
        native = _read_natively(part)
        if isinstance(native, str):
            left += 1
            continue
        read += 1
        assert native == _read_with_duckdb(part, tmp_path), part
    assert read > 300 and left > 300, (read, left)  # both sides of the rule are exercised


# every way a pid or tid is written (an integer, the text of one, text that only looks like one, other text, null,
# missing) and every device-event stream (given, null, missing), for ingest_scanned.sql's keys and stream rule
THREAD_FORMS = ["7", "-3", "2147483648", '"7"', '"-3"', '"07"', '"+7"', '" 7"', '"99999999999999999999"', '"Spans"']
THREAD_FORMS += ['""', "null", None]


def test_thread_keys_and_streams_read_natively_as_duckdb_reads_them(tmp_path):
    events = []
    for pid in THREAD_FORMS:
        for tid in THREAD_FORMS:
            for cat in ('"kernel"', '"gpu_memset"', '"memcpy"', '"cpu_op"'):
                for stream in ('"stream": 4, ', '"stream": null, ', ""):
                    keys = [f'"pid": {pid}'] * (pid is not None) + [f'"tid": {tid}'] * (tid is not None)
                    fields = ", ".join([f'"ph": "X", "cat": {cat}, "name": "n"', *keys, '"ts": 1, "dur": 1'])
                    events.append(f'{{{fields}, "args": {{{stream}"correlation": 1}}}}')
    part = ("[" + ", ".join(events) + "]").encode()
    native = _read_natively(part)
    assert not isinstance(native, str), native
    assert len(native) == len(THREAD_FORMS) ** 2 * 12
    assert native == _read_with_duckdb(part, tmp_path)


def test_the_reader_gives_each_device_events_stream_and_whether_ids_are_text():
    # ingest_scanned.sql inserts the stream column as the reader gives it: a device event (its category as inserted:
    # "memcpy" is gpu_memcpy) without a stream arg has its integer tid there where it fits an int32, as ingest.sql
    # gives it; and only a part with a pid or tid written as a string goes through ingest_scanned_text_ids.sql
    kernel = '{"ph": "X", "cat": "%s", "name": "k", "pid": 0, "tid": %s, "ts": 1, "dur": 1, "args": {%s}}'
    events = [
        kernel % ("kernel", "7", ""),
        kernel % ("kernel", "7", '"stream": 3'),
        kernel % ("gpu_memset", "2147483648", ""),
        kernel % ("memcpy", "5", '"stream": null'),
        kernel % ("cpu_op", "7", ""),
    ]
    scanned = ingest.native_reader.scan(("[" + ", ".join(events) + "]").encode(), 0)
    con = duckdb.connect()
    con.register("scanned_part", ingest._ArrowStream(scanned[1]))
    assert con.execute("SELECT stream FROM scanned_part").fetchall() == [(7,), (3,), (None,), (5,), (None,)]
    assert ingest.scanned_insert(scanned[5]) == "ingest_scanned.sql"
    text_tid = ingest.native_reader.scan(("[" + kernel % ("kernel", '"7"', "") + "]").encode(), 0)
    assert ingest.scanned_insert(text_tid[5]) == "ingest_scanned_text_ids.sql"


DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME = {"cuda_runtime", "cuda_driver"}
OPERATOR = {"cpu_op", "user_annotation"}
OTHER_LAUNCH = {"xpu_runtime", "xpu_driver", "privateuse1_runtime", "privateuse1_driver"}  # held to rules 1-3 only


def _rules_broken(rows: list[tuple]) -> int:
    """The events that break validate.sql's rules 1-7, counted from the rows (a reference apart from both)."""
    count = 0
    for _event_id, ph, cat, name, pid, tid, ts, dur, correlation, *rest in rows:
        pid_name, tid_name = rest[-3:-1]  # a name stands for the key ingest gives it
        pid, tid = (pid if pid_name is None else pid_name), (tid if tid_name is None else tid_name)
        if ph != "X":
            count += cat in DEVICE
            continue
        count += (
            (cat in DEVICE | RUNTIME | OPERATOR | OTHER_LAUNCH and (ts is None or dur is None or dur < 0))
            or (cat in DEVICE | RUNTIME and correlation is None)
            or (cat in DEVICE | RUNTIME | OPERATOR and name is None)
            or (cat in RUNTIME | OPERATOR and (pid is None or tid is None))
        )
    return count


def _rule_event(rng: random.Random) -> str:
    """An event the native reader reads, with each field the rules look at present, null or missing."""
    fields = {
        "ph": ['"X"', '"X"', '"i"', "null"],
        "cat": [
            '"kernel"',
            '"gpu_memset"',
            '"cuda_runtime"',
            '"cuda_driver"',
            '"cpu_op"',
            '"user_annotation"',
            '"xpu_runtime"',
            '"x"',
        ],
        "name": ['"n"', "null"],
        "pid": ["1", "null", '"Spans"'],
        "tid": ["2", "null", '"7"'],
        "ts": ["1.5", "null"],
        "dur": ["2", "0", "-1", "null"],
        "args": ['{"correlation": 5}', "{}", '{"correlation": null}'],
    }
    chosen = [f'"{key}": {rng.choice(values)}' for key, values in fields.items() if rng.random() < 0.93]
    return "{" + ", ".join(chosen) + "}"


def test_the_native_reader_counts_the_events_validate_sql_refuses():
    """Its count of events breaking rules 1-7 is what lets validate.sql skip them: it must be exact."""
    rng = random.Random(1130)
    clean = broken = 0
    for _ in range(300):
        part = ("[" + ", ".join(_rule_event(rng) for _ in range(rng.randrange(1, 4))) + "]").encode()
        scanned = ingest.native_reader.scan(part, 0)
        assert scanned[0] is not None, part
        con = _inserted(scanned)
        rows = con.execute("SELECT * FROM events ORDER BY event_id").fetchall()
        assert scanned[2] == _rules_broken(rows), part
        con.execute("SET VARIABLE ks_rows_checked = false")
        define_scope_names(con, "ks.module:", "ks.fn:")  # the macros every run's connection has (ks_launch_category)
        refused = con.execute(sql_text("validate.sql")).fetchone()
        assert (refused is not None and refused[0] <= 7) == (scanned[2] > 0), part
        clean, broken = clean + (scanned[2] == 0), broken + (scanned[2] > 0)
    assert clean > 25 and broken > 100, (clean, broken)


REPEAT_FIELDS = {
    "ph": ['"X"', '"X"', '"X"', '"i"', "null"],
    "cat": ['"kernel"', '"gpu_memcpy"', '"gpu_memset"', '"cuda_runtime"', '"cuda_driver"', '"xpu_runtime"']
    + ['"privateuse1_driver"', '"Runtime"', '"Kernel"', '"cpu_op"', '"x"'],
    "ts": ["1", "2", "null"],
    "correlation": ["5", "6", "null"],
    "device": ["0", "1", "null"],
    "stream": ["7", "8", "null"],
    # a device event without a stream has its tid's (ingest.sql): the same as another's stream, or not an integer's
    "tid": ["2", "2", "2", "2", "2", "7", '"7"', "null", "2147483648"],
}


def _repeat_part(rng: random.Random) -> bytes:
    """Launches and device events of few distinct correlations, devices, streams, threads and starts, each present,
    null or missing: often a copy of an event before it, as it is (a repeat) or with one field changed (nearly one)."""
    return ("[" + ", ".join(repeat_events(rng, rng.randrange(1, 7))) + "]").encode()


def repeat_events(rng: random.Random, count: int) -> list[str]:
    """``count`` events of _repeat_part's kinds, each a JSON object."""
    events: list[dict] = []
    for _ in range(count):
        if events and rng.random() < 0.5:
            event = dict(rng.choice(events))
            if rng.random() < 0.5:
                key = rng.choice(list(REPEAT_FIELDS))
                event[key] = rng.choice(REPEAT_FIELDS[key] + [None])  # None: missing
        else:
            event = {key: rng.choice(values) if rng.random() < 0.93 else None for key, values in REPEAT_FIELDS.items()}
        events.append(event)

    def members(event: dict, keys) -> list[str]:
        return [f'"{key}": {event[key]}' for key in keys if event[key] is not None]

    written = [
        members(e, ("ph", "cat", "ts")) + ['"name": "n", "pid": 1'] + members(e, ("tid",)) + ['"dur": 1']
        + [f'"args": {{{", ".join(members(e, ("correlation", "device", "stream")))}}}']
        for e in events
    ]  # fmt: skip
    return ["{" + ", ".join(w) + "}" for w in written]


def test_the_native_reader_finds_the_repeats_validate_repeats_sql_finds():
    """Its answer lets validate.py skip validate_repeats.sql on a trace read as one part: it must be the query's."""
    rng = random.Random(1204)
    found = {True: 0, False: 0}
    define_scope_names(_connection("native"), "ks.module:", "ks.fn:")  # the macros of every run (ks_launch_category)
    for _ in range(400):
        part = _repeat_part(rng)
        scanned = ingest.native_reader.scan(part, 0, False, True)
        assert scanned[0] is not None, part
        assert ingest.native_reader.scan(part, 0)[3] is None, "asked for only"
        con = _inserted(scanned)
        assert scanned[3] is con.execute(sql_text("validate_repeats.sql")).fetchone()[0], part
        found[scanned[3]] += 1
    assert min(found.values()) > 60, found  # both answers are exercised


@pytest.mark.parametrize("trace", SAMPLE_TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_traces_read_as_one_part_are_checked_for_repeats_natively(trace):
    con = duckdb.connect()
    header = ingest.ingest_trace(con, trace)
    define_scope_names(con, "ks.module:", "ks.fn:")
    assert header.repeats is con.execute(sql_text("validate_repeats.sql")).fetchone()[0] is False


@pytest.mark.parametrize(
    "text, reason",
    [
        ('{"ph": "X", "args": {"a": "\\u00e9"}}', "a \\u escape"),
        ('{"ph": "X", "args": {"a": 1e3}}', "a number with an exponent in args"),
        ('{"ph": "X", "args": {"a": 0.0000001}}', "a number below 1e-6 in args"),
        ('{"ph": "X", "args": {"a": 0.33333333333333331}}', "a number that is not in its shortest form in args"),
        ('{"ph": "X", "ts": 1.2345}', "a ts or dur DuckDB would round"),
        ('{"ph": "f", "id": "012"}', "an id string that may read as a number"),
        ('{"ph": "X", "pid": true}', "a pid or tid of another type"),
        ('{"ph": "X", "ph": "B"}', "a key twice in an event"),
        ('{"ph": "X", "args": {"correlation": "5"}}', "a join key that is not an integer"),
        ('{"ph": "X", "args": {"args": {"correlation": 5}}}', "args nested in args"),
        ('{"ph": "X",}', "invalid JSON"),
        ('{"ph": "é"}', "a byte outside ASCII"),
    ],
)
def test_what_the_native_reader_leaves_to_duckdb(text, reason):
    scanned = ingest.native_reader.scan(f"[{text}]".encode(), 0)
    assert scanned[0] is None and scanned[1] == reason


def test_the_rewrites_the_native_reader_makes_are_duckdbs(tmp_path):
    part = (
        b'[{"ph":"X","cat":"a\\/b","name":"q\\"\\t","pid":"Spans","tid":"","ts":1,"dur":0.5,'
        b'"args":{ "f" : 1.50, "g": [2.0, 100.0, -0.5, 0.000001, 0.0006373486297004461], "s": "x\\/y\\n",'
        b' "correlation": 9, "External id": null, "big": 12345678901234567890}}]'
    )
    native = _read_natively(part)
    assert native == _read_with_duckdb(part, tmp_path)
    key = "SELECT -4611686018427387904 - CAST(hash(?) % 4611686018427387904 AS BIGINT)"  # ingest.sql's, of a name
    # fetched whole: a result left unfinished on the default connection blocks the next test that uses it
    spans, blank = (duckdb.execute(key, [name]).fetchall()[0][0] for name in ("Spans", ""))
    assert spans < -(2**62) + 1 and blank < -(2**62) + 1 and spans != blank
    assert native[0][1:-1] == (  # the columns the readers read (the last is the rank the insert writes)
        "X",
        "a/b",
        'q"\t',
        spans,
        blank,
        1000,
        500,
        9,
        None,
        None,
        None,
        '{"f":1.5,"g":[2.0,100.0,-0.5,0.000001,0.0006373486297004461],"s":"x/y\\n","correlation":9,'
        '"External id":null,"big":12345678901234567890}',
        None,
        "Spans",
        "",
    )


def test_a_part_left_to_duckdb_loads_the_same_and_says_why(tmp_path):
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(4)]
    events[2]["args"] = {"note": "caf\u00e9"}
    path = tmp_path / "trace.json"
    text = json.dumps({"traceEvents": events})  # json.dumps writes \u00e9
    path.write_text(text)
    con = duckdb.connect()
    header = ingest.ingest_trace(con, path)
    at = text.index("\\u00e9") - text.index("[") - 1  # a plain trace's part: the bytes inside the brackets
    assert header.native_parts == [] and header.duckdb_parts == [f"a \\u escape at byte {at} of the part"]
    assert con.execute("SELECT args FROM events WHERE event_id = 2").fetchone() == ('{"note":"café"}',)


@pytest.mark.parametrize("bare", [b"", b" \n\t ", b'{"ph": "X"}', b' {"ph": "X"},\n {"ph": "B"} '])
def test_bare_parts_read_as_the_array_they_are_cut_from(bare, tmp_path):
    native = _read_natively(bare, bare=True)
    assert not isinstance(native, str), native
    assert native == _read_with_duckdb(b"[" + bare + b"]", tmp_path)


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "gz"])
def test_parts_read_by_either_reader_load_as_one_part_read_by_duckdb(compressed, tmp_path, monkeypatch):
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"op{i}",
            "pid": 1,
            "tid": 1,
            "ts": i,
            "dur": 1,
            "args": {"External id": i},
        }
        for i in range(3000)
    ]
    events[1700]["args"]["note"] = "caf\u00e9"  # the part holding it goes to DuckDB's reader, the others do not
    text = json.dumps({"traceEvents": events}, indent=1).encode()
    path = tmp_path / ("trace.json.gz" if compressed else "trace.json")
    path.write_bytes(gzip.compress(text) if compressed else text)
    query = "SELECT * FROM events ORDER BY event_id"
    with monkeypatch.context() as patch:
        patch.setattr(ingest, "native_reader", None)
        whole = duckdb.connect()
        assert ingest.ingest_trace(whole, path).native_parts == []
    for name in ("MIN_PART_BYTES", "MAX_PART_BYTES", "STREAM_PART_BYTES"):
        monkeypatch.setattr(ingest, name, 32 << 10)
    parts = duckdb.connect()
    header = ingest.ingest_trace(parts, path)
    assert len(header.native_parts) >= 4 and len(header.duckdb_parts) == 1
    assert parts.execute(query).fetchall() == whole.execute(query).fetchall()


def test_mutated_parts_in_guarded_buffers():
    """Parts of real traces, mutated, in buffers that end (and begin) at a page the process may not touch: a read
    past either end would kill the test run here, not go unseen."""
    import native_fuzz

    counts = native_fuzz.fuzz(ingest.native_reader.scan, 3000, seed=1201)
    assert counts["rows"] > 1000 and counts["left"] > 1000, counts  # both read and left parts are exercised


def test_the_reader_under_address_and_undefined_behaviour_sanitizers(tmp_path):
    """_kineto.c built with -fsanitize=address,undefined, its tests and the guarded fuzz run against that build in
    a subprocess (libasan preloaded, Python's allocator off so every buffer is malloc's): any read or write out of
    bounds, or undefined behaviour, fails this test. CI must run it: there a missing compiler or libasan fails."""
    import subprocess
    import sys

    from sanitized import sanitized_build

    module, env = sanitized_build("_kineto", tmp_path)
    script = REPO / "tests" / "native_fuzz.py"
    done = subprocess.run([sys.executable, str(script), str(module), "3000"], env=env, capture_output=True, text=True)
    report = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, report
    assert "guarded parts" in done.stdout, report  # and pytest's run of this file passed (the return code)
    assert "AddressSanitizer" not in done.stderr and "runtime error" not in done.stderr, report


ESCAPES = ['\\"', "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"]


@pytest.mark.parametrize("escape", ESCAPES)
def test_each_escape_reads_natively_as_duckdb_reads_it(escape, tmp_path):
    """In the decoded strings (ph, cat, name) and in args (kept as written but "\\/"), alone, first, last and twice,
    in values and nested keys; a key of args itself with one is left to DuckDB."""
    text = f"{escape}a{escape}{escape}b{escape}"
    part = (
        f'[{{"ph": "{escape}", "cat": "{text}", "name": "{escape}x", "pid": 1, "tid": 2, "ts": 1, "dur": 2,'
        f' "args": {{"s": "{text}", "k": ["{escape}", {{"{text}": "{escape}"}}], "correlation": 3}}}}]'
    ).encode()
    native = _read_natively(part)
    assert not isinstance(native, str), native
    assert native == _read_with_duckdb(part, tmp_path)
    escaped_key = part.replace(b'"s"', f'"{escape}"'.encode())
    assert _read_natively(escaped_key) == "left: a key with an escape or a byte outside ASCII"


# integers of 19 and more digits, and leading zeros: each where the reader reads a number (ts, dur, pid, tid, the
# join keys, any args value); each read as DuckDB reads it, or left to it
LONG_OR_ZERO_PADDED = [
    "1234567890123456789",
    "-1234567890123456789",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "00",
    "012",
    "-012",
    "00.5",
    "0012.5",
    "9999999999999999.999",
    "9223372036854775.807",
    "9223372036854775.808",
    '"012"',
    '"00"',
    '"1234567890123456789"',
    '"9223372036854775808"',
    '"-9223372036854775809"',
    '"-0"',
]


@pytest.mark.parametrize("number", LONG_OR_ZERO_PADDED)
@pytest.mark.parametrize("field", ["ts", "dur", "pid", "tid", "correlation", "External id", "stream", "value"])
def test_long_integers_and_leading_zeros_read_as_duckdb_reads_them_or_are_left(number, field, tmp_path):
    event = {"ph": '"X"', "cat": '"kernel"', "name": '"k"', "pid": "1", "tid": "2", "ts": "5", "dur": "1"}
    args = {"correlation": "7", "External id": "8", "stream": "9", "value": "1"}
    (event if field in event else args)[field] = number
    event["args"] = "{" + ", ".join(f'"{k}": {v}' for k, v in args.items()) + "}"
    part = ("[{" + ", ".join(f'"{k}": {v}' for k, v in event.items()) + "}]").encode()
    native = _read_natively(part)
    if not isinstance(native, str):
        assert native == _read_with_duckdb(part, tmp_path)
