"""Chrome-trace shapes other writers give a trace, on both readers: spans written as "B"/"E" pairs, phases the
attribution does not read mixed in, a bare array, traceEvents after large keys, times in exponent notation, events
in reverse order, correlations written as strings, args nested in args (Perfetto's JSON export). Each gives the rows
of the same trace written as Kineto writes it, and the reference's (tests/reference.py)."""

import gzip
import json
import random
import re
from decimal import Decimal

import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.analyzer import load_run
from kernelscope.analyzer.errors import BadInputError
from kernelscope.cli import main
from reference import assert_matches_reference
from test_trace_text import reader  # noqa: F401 - the fixture of both readers

pytestmark = pytest.mark.usefixtures("reader")  # every test on each reader

MLP = REPO / "sample_traces" / "mlp" / "trace.json.gz"  # 6 kernels under ks.module/ks.fn scopes
SPANS = ("cpu_op", "user_annotation", "cuda_runtime", "kernel")
COLUMNS = ["module_name", "function_name", "op", "call_op", "kernel", "kernel_us"]


def _doc() -> dict:
    return json.loads(gzip.decompress(MLP.read_bytes()), parse_float=Decimal)


def _text(doc) -> str:
    """The JSON of ``doc``, its Decimal times written as the exact numbers they are."""
    return re.sub(r'"@(-?[0-9.Ee+-]+)@"', r"\1", json.dumps(doc, default=lambda d: f"@{d}@"))


def _write(tmp_path, doc, name="trace") -> object:
    path = tmp_path / f"{name}.json"
    path.write_text(_text(doc))
    return path


def _rows(path):
    with load_run(path) as run:
        assert_matches_reference(run, path)
        return run.profiling_df()[COLUMNS].to_dict("records")


def _as_begin_end(doc: dict, seed: int = 0) -> dict:
    """Every span of SPANS as a "B" and an "E" event (the E with the correlation of a launch, as a writer may put
    it), in shuffled order."""
    events = []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in SPANS:
            events.append(e)
            continue
        begin, args = {**e, "ph": "B"}, dict(e.get("args") or {})
        end = {"ph": "E", "pid": e["pid"], "tid": e["tid"], "ts": e["ts"] + begin.pop("dur")}
        if "correlation" in args and e["cat"] == "cuda_runtime":
            end["args"] = {"correlation": args.pop("correlation")}
            begin["args"] = args
        events += [begin, end]
    random.Random(seed).shuffle(events)
    # an "E" on a thread with no span open (ignored) and a "B"/"E" pair of a category nothing reads
    thread = next(e for e in events if e.get("cat") == "cpu_op")
    first = min(e["ts"] for e in events if "ts" in e)
    events += [{"ph": "E", "pid": thread["pid"], "tid": thread["tid"], "ts": first - 5},
               {"ph": "B", "cat": "python_function", "name": "f", "pid": 1, "tid": 1, "ts": first}]  # fmt: skip
    return {**doc, "traceEvents": events}


def test_begin_and_end_events_pair_into_the_spans_they_stand_for(tmp_path):
    """A writer that writes each span as a "B" and an "E" event gives the rows of the same trace written with
    complete events: each "E" ends the latest "B" still open on its thread."""
    doc = _doc()
    complete = _rows(_write(tmp_path, doc, "complete"))
    with load_run(tmp_path / "complete.json") as run:
        assert run.profiling_df()["thread_name"].isna().all(), "threads the trace numbers have no name"
    paired = _rows(_write(tmp_path, _as_begin_end(doc)))
    assert paired == complete and len(paired) == 6 and {r["function_name"] for r in paired} == {"linear", "relu"}


def test_end_events_that_repeat_their_begins_category_and_name_end_their_spans(tmp_path):
    """The format matches an "E" to its "B" by the thread's stack alone, and a writer may repeat the span's cat and name
    on the "E" (Chrome's viewer ignores them): a kernel's "E" of cat "kernel" ends the kernel's span, and is no device
    event of its own. Before, it was refused as a device event whose ph is "E", not "X"."""
    doc = _doc()
    complete = _rows(_write(tmp_path, doc, "complete"))
    paired = _as_begin_end(doc)
    open_spans: dict[tuple, list] = {}
    for e in sorted(paired["traceEvents"], key=lambda e: (e.get("ts", 0), e.get("ph") != "E")):
        thread = (e.get("pid"), e.get("tid"))
        if e.get("ph") == "B":
            open_spans.setdefault(thread, []).append(e)
        elif e.get("ph") == "E" and open_spans.get(thread):
            begin = open_spans[thread].pop()
            e.update(cat=begin["cat"], name=begin["name"])
    assert sum(e.get("ph") == "E" and e.get("cat") == "kernel" for e in paired["traceEvents"]) == 6
    assert _rows(_write(tmp_path, paired)) == complete


def test_begin_events_at_one_time_nest_in_the_order_they_are_written(tmp_path):
    """Spans that begin at the same time nest as the file orders them: the outer one's "B" first. The first "E"
    then ends the inner one (an operator), the next the outer one (a scope a microsecond longer)."""
    doc = _doc()
    events = doc["traceEvents"]
    op = next(e for e in events if e.get("ph") == "X" and e.get("name") == "aten::addmm")
    events.remove(op)
    end = op["ts"] + op["dur"]
    thread = {"pid": op["pid"], "tid": op["tid"]}
    events += [
        {"ph": "B", "cat": "user_annotation", "name": "outer", "ts": op["ts"], **thread},
        {**{k: v for k, v in op.items() if k != "dur"}, "ph": "B"},
        {"ph": "E", "ts": end, **thread},
        {"ph": "E", "ts": end + 1, **thread},
    ]
    path = _write(tmp_path, doc)
    with load_run(path) as run:
        assert_matches_reference(run, path)
        spans = run.sql(f"SELECT name, dur_ns FROM events WHERE ph = 'X' AND ts_ns = {int(op['ts'] * 1000)}")
        assert dict(spans.itertuples(index=False, name=None)) == {
            "outer": int(op["dur"] * 1000) + 1000,
            "aten::addmm": int(op["dur"] * 1000),
        }


def _sorted_by_time_then_phase(doc: dict) -> dict:
    """The trace as a writer that sorts its events by time and then by phase writes it: at one time a "B" before an
    "E"."""
    doc["traceEvents"].sort(key=lambda e: (Decimal(e.get("ts", 0)), e.get("ph") != "B"))
    return doc


def test_a_span_that_ends_where_the_next_begins_ends_first_whichever_the_file_writes_first(tmp_path):
    """The module that holds relu begins where the one that holds linear ends, and the file writes the "B" of the
    next before the "E" of the first (sorted by time, then phase). Read in the file's order (Chrome's), the "E" would
    end the span just begun, and the first module would hold the second's kernels; at one time the "E"s come first."""
    doc = _doc()
    first = next(e for e in doc["traceEvents"] if e.get("name") == "ks.module:0")
    second = next(e for e in doc["traceEvents"] if e.get("name") == "ks.module:1")
    end = first["ts"] + first["dur"]
    second["ts"], second["dur"] = end, second["ts"] + second["dur"] - end  # earlier: no event of it moves out
    complete = _rows(_write(tmp_path, doc, "complete"))
    with load_run(tmp_path / "complete.json") as run:
        assert run.profiling_df()["thread_name"].isna().all(), "threads the trace numbers have no name"
    paired = _rows(_write(tmp_path, _sorted_by_time_then_phase(_as_begin_end(doc))))
    assert paired == complete and [r["module_name"] for r in paired if r["function_name"] == "relu"][0] == "1"


def test_a_span_of_no_time_does_not_end_the_span_around_it(tmp_path):
    """A span that begins and ends at one time, its "E" after its "B" and named as it is, is a span of no time inside
    the operator around it: its "E" does not end that operator, which the "E"s-first order alone would have it do."""
    doc = _as_begin_end(_doc())
    op = next(e for e in doc["traceEvents"] if e.get("ph") == "B" and e.get("name") == "aten::addmm")
    thread = {"pid": op["pid"], "tid": op["tid"], "ts": op["ts"] + 1}
    doc["traceEvents"] += [
        {"ph": "B", "cat": "user_annotation", "name": "mark", **thread},
        {"ph": "E", "name": "mark", **thread},
    ]
    path = _write(tmp_path, doc)
    complete = _rows(_write(tmp_path, _doc(), "complete"))
    assert _rows(path) == complete
    with load_run(path) as run:
        assert run.con.execute("SELECT dur_ns FROM events WHERE name = 'mark' AND ph = 'X'").fetchall() == [(0,)]


def test_a_begin_event_that_nothing_ends_is_refused(tmp_path):
    """An operator's "B" with no "E" on its thread has no end, so what it holds is not known: refused, naming it,
    with exit status 2 from the command."""
    doc = _as_begin_end(_doc())
    ends = [e for e in doc["traceEvents"] if e.get("ph") == "E" and e.get("args")]  # of launches
    ends[0]["tid"] = 12345  # moved to another thread: its launch's "B", and the spans around it, end no more
    path = _write(tmp_path, doc)
    with pytest.raises(BadInputError, match=r'traceEvents\[\d+\] \(.*\) begins a span \("ph": "B"\) that no "E" '):
        load_run(path)
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 2 and 'that no "E" event of its thread (pid, tid) ends' in result.output


def _phases(doc):
    at = doc["traceEvents"][-1]["ts"]
    instants = [{"ph": p, "name": p, "ts": at, "pid": 1, "tid": 1, "id": 5, "cat": "x"} for p in "iInbeRPcNOD"]
    instants.append({"ph": "C", "name": "counter", "ts": at, "pid": 1, "args": {"value": 3}})
    return {**doc, "traceEvents": instants[:6] + doc["traceEvents"] + instants[6:]}


def _format_features_not_read(doc):
    """What else the Chrome format lets a trace hold, which gives no row and moves none: thread times (tts, tdur) on
    every complete event, displayTimeUnit "ms" (a viewer's unit, not the trace's), every metadata event first and a
    thread_name and thread_sort_index of its own, counters ("C"), samples ("P") with the stackFrames and samples keys,
    async slices ("b", "n", "e") and flow steps ("t") of a category nothing reads, and the Object form's other keys
    (powerTraceAsString, systemTraceEvents as the Fuchsia object holding an array after traceEvents)."""
    events = doc["traceEvents"]
    for e in events:
        if e.get("ph") == "X":
            e["tts"], e["tdur"] = e["ts"] - 3, e.get("dur", 0)
    at = next(e["ts"] for e in events if e.get("cat") == "kernel")
    events = [e for e in events if e.get("ph") == "M"] + [e for e in events if e.get("ph") != "M"]
    events[:0] = [
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        {"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": 7, "args": {"sort_index": 7}},
    ]
    events += [
        {"ph": "C", "name": "memory", "pid": 0, "ts": at, "args": {"allocated": 5, "reserved": 8}},
        {"ph": "P", "name": "sample", "pid": 0, "tid": 7, "ts": at, "sf": 1},
        {"ph": "b", "cat": "io", "name": "read", "pid": 0, "tid": 7, "ts": at, "id": "0x5"},
        {"ph": "n", "cat": "io", "name": "chunk", "pid": 0, "tid": 7, "ts": at, "id": "0x5"},
        {"ph": "e", "cat": "io", "name": "read", "pid": 0, "tid": 7, "ts": at, "id": "0x5"},
        {"ph": "t", "cat": "io", "name": "step", "pid": 0, "tid": 7, "ts": at, "id2": {"local": "0x5"}},
    ]
    return {
        "powerTraceAsString": "",
        **doc,
        "displayTimeUnit": "ms",
        "traceEvents": events,
        "stackFrames": {"1": {"name": "main", "category": "python"}},
        "samples": [{"cpu": 0, "tid": 7, "ts": 1, "name": "cycles", "sf": 1, "weight": 1}],
        "systemTraceEvents": {"type": "fuchsia", "events": [{"ph": "X", "ts": 1, "dur": 1}]},
    }


def _threads_renamed(name) -> object:
    """Every integer pid and tid of a trace as the string ``name`` makes of it (Chrome takes any value there)."""

    def renamed(doc):
        for e in doc["traceEvents"]:
            for key in ("pid", "tid"):
                if isinstance(e.get(key), int):
                    e[key] = name(key, e[key])
        return doc

    return renamed


SHAPES = {
    "phases not read, mixed in": _phases,
    "a bare array": lambda doc: doc["traceEvents"],
    "traceEvents after large keys": lambda doc: {
        "notes": "x" * (1 << 20),
        "steps": list(range(50_000)),
        "nested": {"traceEvents": [1]},
        **doc,
    },
    "displayTimeUnit ns": lambda doc: {**doc, "displayTimeUnit": "ns"},
    "the format's features not read": _format_features_not_read,
    "reverse order": lambda doc: {**doc, "traceEvents": doc["traceEvents"][::-1]},
    "process names twice": lambda doc: {
        **doc,
        "traceEvents": doc["traceEvents"] + [e for e in doc["traceEvents"] if e.get("name") == "process_name"],
    },
    "pids and tids as names": _threads_renamed(lambda key, n: f"{'process' if key == 'pid' else 'thread'} {n}"),
    "pids and tids as digit strings": _threads_renamed(lambda key, n: str(n)),
    "pids as names, tids integers": _threads_renamed(lambda key, n: f"process {n}" if key == "pid" else n),
    "tids as names, pids integers": _threads_renamed(lambda key, n: f"thread {n}" if key == "tid" else n),
    # Perfetto's JSON export of a JSON trace it read (export_json.cc: each event's args as its importer stored them,
    # under "args."): every event's args nested in an "args" object, the metadata events' not
    "args nested in args (Perfetto's JSON export)": lambda doc: {
        **doc,
        "traceEvents": [
            {**e, "args": {"args": e["args"]}} if isinstance(e.get("args"), dict) and e.get("ph") != "M" else e
            for e in doc["traceEvents"]
        ],
    },
    "correlations as strings": lambda doc: {
        **doc,
        "traceEvents": [
            {**e, "args": {k: str(v) if k in ("correlation", "External id") else v for k, v in e["args"].items()}}
            if isinstance(e.get("args"), dict)
            else e
            for e in doc["traceEvents"]
        ],
    },
}


@pytest.mark.parametrize("shape", SHAPES)
def test_other_writers_shapes_give_the_rows_of_the_trace(tmp_path, shape):
    doc = _doc()
    complete = _rows(_write(tmp_path, doc, "complete"))
    with load_run(tmp_path / "complete.json") as run:
        assert run.profiling_df()["thread_name"].isna().all(), "threads the trace numbers have no name"
    assert _rows(_write(tmp_path, SHAPES[shape](_doc()))) == complete


def test_times_in_exponent_notation_read_exactly(tmp_path):
    """ts written as 5.561389141390792e+12 (a writer printing doubles) reads as the same nanoseconds."""
    doc = _doc()
    complete = _rows(_write(tmp_path, doc, "complete"))
    with load_run(tmp_path / "complete.json") as run:
        assert run.profiling_df()["thread_name"].isna().all(), "threads the trace numbers have no name"
    for e in doc["traceEvents"]:
        if "ts" in e:
            e["ts"] = f"{Decimal(e['ts']):e}"  # 5.561389141390792e+12: every digit kept
    text = re.sub(r'"ts": "([0-9.e+]+)"', r'"ts": \1', json.dumps(doc, default=lambda d: f"@{d}@"))
    text = re.sub(r'"@(-?[0-9.Ee+-]+)@"', r"\1", text)
    assert '"ts": 5.149988115355895e+12' in text
    path = tmp_path / "exponents.json"
    path.write_text(text)
    assert _rows(path) == complete


@pytest.mark.parametrize("ending", ["", ",", ",\n", "\n"], ids=["no ]", "a comma", "a comma, a newline", "a newline"])
@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_a_bare_array_may_leave_off_its_closing_bracket(tmp_path, ending, compressed):
    """The Chrome format's array form lets its "]" be left off (a process that stopped while writing events): the
    events up to the last whole one are the trace. One cut inside an event is still cut short."""
    doc = _doc()
    complete = _rows(_write(tmp_path, doc, "complete"))
    with load_run(tmp_path / "complete.json") as run:
        assert run.profiling_df()["thread_name"].isna().all(), "threads the trace numbers have no name"
    text = _text(doc["traceEvents"]).encode()
    unclosed = text[: text.rindex(b"]")] + ending.encode()
    path = tmp_path / ("unclosed.json.gz" if compressed else "unclosed.json")
    path.write_bytes(gzip.compress(unclosed) if compressed else unclosed)
    assert _rows(path) == complete
    cut = unclosed[: len(unclosed) - len(ending) - 40]  # inside the last event
    path.write_bytes(gzip.compress(cut) if compressed else cut)
    with pytest.raises(BadInputError, match="ends before the trace object is complete"):
        load_run(path)


def test_a_thread_written_as_a_digit_string_is_the_thread_of_that_integer(tmp_path):
    """A "tid": "887" and a "tid": 887 are one thread, as Chrome's trace viewer and Perfetto read them (the 2021 format
    writes a thread both ways): a module scope around each launch on the thread written 887 holds the launch written
    on "887". The thread keeps its integer, and no name; "0887" is no integer's text and stays a name."""
    doc = _doc()
    complete = _rows(_write(tmp_path, doc, "complete"))
    decoys = []
    for e in doc["traceEvents"]:
        if e.get("pid") == 887 and e.get("tid") == 887:
            e["tid"] = "887"
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("ph") == "X":
                around = {"ts": e["ts"] - Decimal("0.001"), "dur": e["dur"] + Decimal("0.002")}
                decoys.append({"ph": "X", "cat": "cpu_op", "name": "ks.module:0", "pid": 887, "tid": 887, **around})
    path = _write(tmp_path, doc, "text")
    assert _rows(path) == complete
    doc["traceEvents"] += decoys
    path = _write(tmp_path, doc)
    assert _rows(path) == [{**row, "module_name": "0"} for row in complete]
    with load_run(path) as run:
        named = "SELECT DISTINCT tid_name, tid FROM events WHERE pid = 887 AND cat = 'cpu_op'"
        assert run.con.execute(named).fetchall() == [(None, 887)]
        frame = run.profiling_df()
        assert set(frame["thread"]) == {887} and frame["thread_name"].isna().all()
    for e in doc["traceEvents"]:
        if e.get("tid") == "887":
            e["tid"] = "0887"
    path = _write(tmp_path, doc, "zero")
    assert _rows(path) == complete, "the decoys, on thread 887, hold none of the launches on thread '0887'"
    with load_run(path) as run:
        assert set(run.profiling_df()["thread_name"]) == {"0887"}


def _perfetto_export(doc: dict, nested: bool = True) -> dict:
    """``doc`` as Perfetto's JSON export writes a JSON trace it read (src/trace_processor/export_json.cc): times cut
    to whole µs (ts / 1000 of its nanoseconds), its thread names as "__metadata" events at ts 0 first, each event's
    args nested in "args" (its importer's "args." keys, split at the dots), a span of no time as an "I" instant."""
    events = [{"ph": "M", "cat": "__metadata", "ts": 0, "name": "thread_name", "pid": 19392, "tid": 19392,
               "args": {"name": "python3"}}]  # fmt: skip
    for e in doc["traceEvents"]:
        e = {**e, "ts": int(e["ts"])}
        if "dur" in e:
            e["dur"] = int(e["dur"])
            if e["dur"] == 0:
                e = {**{k: v for k, v in e.items() if k != "dur"}, "ph": "I", "s": "t"}
        if nested and "args" in e:
            e["args"] = {"args": e["args"]}
        events.append(e)
    return {"traceEvents": events}


def test_a_trace_perfetto_exported_as_json_gives_the_rows_of_its_events(tmp_path):
    """The BERT excerpt as Perfetto's JSON export writes it: before, no kernel reached its launch (their correlations
    were one level down in args), and each was counted as lost."""
    excerpt = json.loads((REPO / "tests" / "data" / "excerpts" / "frames_h100.json").read_text(), parse_float=Decimal)
    flat = _rows(_write(tmp_path, _perfetto_export(excerpt, nested=False), "flat"))
    path = _write(tmp_path, _perfetto_export(excerpt))
    assert _rows(path) == flat
    assert [row["op"] for row in flat] == ["aten::all", "aten::_local_scalar_dense", "aten::addmm",
                                           "aten::native_layer_norm", "aten::gelu", "aten::add"]  # fmt: skip
    with load_run(path) as run:
        assert run.launch_check().device_events_without_launch == 0
