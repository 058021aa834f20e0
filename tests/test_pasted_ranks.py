"""Several ranks' traces pasted into one file (one traceEvents list, each rank's host events under its own pid, its
device events under its device's): correlation ids restart in each process, every device event is attributed to
the launch of its own process, and each process is a rank of its own."""

import gzip
import json
from pathlib import Path

import pytest
from kernelscope.analyzer import BadInputError, load_run, rank_parts
from reference import assert_matches_reference

TRACES = Path("/work/shared/traces")
SHIFT = 1_000_000  # the second copy's host pids: far from any real one
DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_WORK = ("cuda_runtime", "cuda_driver", "ac2g")  # the launches of device work, their flows to it


def _events(name: str) -> list[dict]:
    return json.loads(gzip.decompress((TRACES / name).read_bytes()))["traceEvents"]


def _shifted(events: list[dict], device_shift: int, offset: int) -> list[dict]:
    """The events of a second process: host pids moved by SHIFT, device pids and args.device by ``device_shift``,
    correlations (and the ac2g flows' ids, which are theirs) by ``offset``, as another rank's counter stands."""
    device_pids = {e["pid"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
    shifted = []
    for event in events:
        event = json.loads(json.dumps(event))
        pid, args = event.get("pid"), event.get("args")
        if isinstance(pid, int) and not isinstance(pid, bool) and pid >= 0:
            event["pid"] = pid + device_shift if pid in device_pids else pid + SHIFT
        if isinstance(args, dict) and "device" in args:
            args["device"] += device_shift
        if isinstance(args, dict) and "correlation" in args:
            args["correlation"] += offset
        if event.get("cat") == "ac2g":
            event["id"] += offset
        shifted.append(event)
    return shifted


def _offset(name: str) -> int:
    """The correlation offset of a second copy of the trace under which most of both copies' device events have a
    correlation that launches of both processes share, while each copy keeps some of its own (as two ranks'
    counters do: correlations are sparse, each CUPTI call takes one)."""
    events = _events(name)
    launches = {e["args"]["correlation"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    device = [e["args"]["correlation"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]

    def shared(offset: int) -> int:
        first, second = sum(c + offset in launches for c in device), sum(c - offset in launches for c in device)
        return first + second if first < len(device) and second < len(device) else -1

    offset = max(sorted({b - a for a in launches for b in launches if b > a}), key=shared)
    assert shared(offset) > 0
    return offset


def _cpu_only(events: list[dict]) -> list[dict]:
    """The events a CPU recording (activities=[CPU]) of the same program holds: none of a device's pid, no launch, no
    flow from a launch to its device event."""
    device_pids = {e["pid"] for e in events if e.get("cat") in DEVICE_WORK}
    return [e for e in events if e.get("pid") not in device_pids and e.get("cat") not in DEVICE_WORK + HOST_WORK]


def _paste(
    tmp_path: Path, first: str, second: str, device_shift: int = 1, offset: int = 0, cpu: bool = False
) -> tuple[Path, int]:
    """One file of ``first``'s events then ``second``'s moved to another process (both CPU recordings where ``cpu``);
    the first one's event count."""
    head = json.loads(gzip.decompress((TRACES / first).read_bytes()))
    events, seconds = head["traceEvents"], _events(second)
    if cpu:
        events, seconds = _cpu_only(events), _cpu_only(seconds)
    head["traceEvents"] = events + _shifted(seconds, device_shift, offset)
    path = tmp_path / "pasted.json"
    path.write_text(json.dumps(head))
    return path, len(events)


def _frame(path: Path):
    run = load_run(path)
    try:
        return run.profiling_df()
    finally:
        run.close()


def _rows(
    frame, first_id: int = 0, end_id: int | None = None, device_shift: int = 0, offset: int = 0, rank: int = 0
) -> list:
    """The rows of events ``first_id`` to ``end_id``, sorted, as their own trace has them: event ids counted from
    ``first_id``, devices less ``device_shift``, correlations less ``offset``, ranks less ``rank``, no start (the
    file's first is not theirs)."""
    held = (frame["event_id"] >= first_id) & (end_id is None or frame["event_id"] < end_id)
    frame = frame[held.to_numpy()].drop(columns=["start_us"])
    frame = frame.assign(
        event_id=frame["event_id"] - first_id,
        call_event_id=frame["call_event_id"] - first_id,
        device=frame["device"] - device_shift,
        correlation=frame["correlation"] - offset,
        rank=frame["rank"] - rank,
    )
    return sorted(map(tuple, frame.astype(object).where(frame.notna(), None).itertuples(index=False)), key=repr)


def _own(tmp_path: Path, name: str, cpu: bool = False) -> list:
    """The rows of trace ``name`` loaded alone (as a CPU recording where ``cpu``)."""
    own = tmp_path / f"own-{name}"
    head = json.loads(gzip.decompress((TRACES / name).read_bytes()))
    head["traceEvents"] = _cpu_only(head["traceEvents"]) if cpu else head["traceEvents"]
    own.write_text(json.dumps(head))
    return _rows(_frame(own))


@pytest.mark.parametrize("name", ["misc.json.gz", "threads.json.gz", "cuda_graph.json.gz", "compile.json.gz"])
def test_each_process_keeps_its_own_rows(tmp_path, name):
    offset = _offset(name)
    path, count = _paste(tmp_path, name, name, offset=offset)
    pasted = _frame(path)
    assert _rows(pasted, 0, count) == _own(tmp_path, name)
    assert _rows(pasted, count, None, 1, offset, rank=1) == _own(tmp_path, name)


def test_traces_of_different_programs_keep_their_rows(tmp_path):
    path, count = _paste(tmp_path, "misc.json.gz", "cuda_graph.json.gz")
    pasted = _frame(path)
    assert _rows(pasted, 0, count) == _own(tmp_path, "misc.json.gz")
    assert _rows(pasted, count, None, 1, rank=1) == _own(tmp_path, "cuda_graph.json.gz")


def test_each_process_of_cpu_recordings_is_a_rank_of_its_own(tmp_path):
    """Processes without device work (CPU recordings: their rows the CPU operators) are told apart by their operators:
    each is a rank of its own, its rows as its own trace has them alone."""
    path, count = _paste(tmp_path, "misc.json.gz", "cuda_graph.json.gz", cpu=True)
    with load_run(path) as run:
        assert run.ranks == [0, 1]
        assert_matches_reference(run, path)
        pasted = run.profiling_df()
    assert _rows(pasted, 0, count) == _own(tmp_path, "misc.json.gz", cpu=True)
    assert _rows(pasted, count, None, rank=1) == _own(tmp_path, "cuda_graph.json.gz", cpu=True)


@pytest.mark.parametrize("name", ["threads.json.gz", "cuda_graph.json.gz"])
def test_the_pasted_file_matches_the_reference(tmp_path, name):
    path, _ = _paste(tmp_path, name, name, offset=_offset(name))
    run = load_run(path)
    try:
        assert_matches_reference(run, path)
    finally:
        run.close()


@pytest.mark.parametrize(
    "device_shift, offset", [(0, True), (1, False)], ids=["one device", "every correlation shared"]
)
def test_device_events_whose_process_is_unknown_are_refused(tmp_path, device_shift, offset):
    """Two processes on one device, or devices none of whose work has a correlation of one process alone."""
    path, _ = _paste(
        tmp_path, "threads.json.gz", "threads.json.gz", device_shift, _offset("threads.json.gz") if offset else 0
    )
    problem = r"has correlation \d+, which launches of processes \(pids\) 449 and 1000449 share, and the other work"
    with pytest.raises(BadInputError, match=r"pasted.json: traceEvents\[\d+\] \(kernel .*\) " + problem):
        load_run(path)


def test_a_correlation_of_any_size_keeps_its_value(tmp_path):
    """Each process is attributed alone: no correlation is numbered per process, so none is too large for it."""
    path, count = _paste(tmp_path, "threads.json.gz", "threads.json.gz", offset=_offset("threads.json.gz"))
    head = json.loads(path.read_text())
    kernel = next(i for i, e in enumerate(head["traceEvents"]) if i > count and e.get("cat") == "kernel")
    head["traceEvents"][kernel]["args"]["correlation"] = 2**61  # a device event's alone: it has no launch
    path.write_text(json.dumps(head))
    run = load_run(path)
    try:
        assert run.ranks == [0, 1]
        row = run.sql(f"SELECT rank, correlation, op FROM kernels WHERE event_id = {kernel}")
        assert row.values.tolist() == [[1, 2**61, None]], "the second process's, a device event without its launch"
        assert run.launch_check().launches_without_device_event == 1, "its launch has none (its flow links it)"
    finally:
        run.close()


def test_events_keep_the_traces_own_correlations_and_external_ids(tmp_path):
    path, _ = _paste(tmp_path, "threads.json.gz", "threads.json.gz", offset=_offset("threads.json.gz"))
    events = json.loads(path.read_text())["traceEvents"]
    expected = sorted(
        (i, (e.get("args") or {}).get("correlation"), (e.get("args") or {}).get("External id"))
        for i, e in enumerate(events)
        if "correlation" in (e.get("args") or {}) or "External id" in (e.get("args") or {})
    )
    run = load_run(path)
    try:
        table = run.sql("SELECT event_id, correlation, external_id FROM events ORDER BY event_id")
        tables = run.sql("SELECT table_name FROM duckdb_tables() WHERE starts_with(table_name, 'ks_process')")
    finally:
        run.close()
    held = table[table["correlation"].notna() | table["external_id"].notna()].astype(object)
    assert sorted(map(tuple, held.where(held.notna(), None).itertuples(index=False))) == expected
    assert tables.empty  # the step tables are dropped


def test_a_pasted_file_s_events_are_held_once_while_its_processes_are_attributed(tmp_path, monkeypatch):
    """Each process's events are copied out of the file's to be attributed, and no more: the rows of the processes
    attributed before it are not held twice (a 1 GB paste would need 2 GB more)."""
    path, _ = _paste(tmp_path, "misc.json.gz", "cuda_graph.json.gz")
    held, attribute = [], rank_parts._attribute

    def counting(con, *args):
        tables = con.execute("SELECT DISTINCT table_name FROM duckdb_columns() WHERE column_name = 'ph'").fetchall()
        held.append(sum(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for (table,) in tables))
        return attribute(con, *args)

    monkeypatch.setattr(rank_parts, "_attribute", counting)
    with load_run(path) as run:
        own = run.sql("SELECT count(*) AS n FROM events GROUP BY rank ORDER BY rank")["n"].tolist()
        assert run.ranks == [0, 1]
    events = len(json.loads(path.read_text())["traceEvents"])
    assert held == [events + n for n in own]


@pytest.mark.parametrize("first", [0, 1], ids=["pasted file first", "pasted file last"])
def test_a_pasted_file_in_a_folder_of_traces_is_its_processes_ranks_beside_the_others(tmp_path, first):
    """A folder of a pasted file of two processes and a trace of one: three ranks, each with its own rows and events,
    whichever is read first (the lower rank)."""
    path, count = _paste(tmp_path, "misc.json.gz", "cuda_graph.json.gz")
    folder = tmp_path / "job"
    folder.mkdir()
    head = json.loads(path.read_text())
    head["distributedInfo"] = {"rank": first}
    (folder / "pasted.json").write_text(json.dumps(head))
    alone = json.loads(gzip.decompress((TRACES / "threads.json.gz").read_bytes()))
    alone["distributedInfo"] = {"rank": 2 * (1 - first)}
    (folder / "alone.json").write_text(json.dumps(alone))
    with load_run(folder) as run:
        assert run.ranks == [0, 1, 2]
        frame = run.profiling_df()
        events = run.sql("SELECT rank, count(*) AS n FROM events GROUP BY rank ORDER BY rank")["n"].tolist()
    other = 2 * (1 - first)
    assert _rows(frame[frame["rank"] == other], rank=other) == _own(tmp_path, "threads.json.gz")
    assert _rows(frame[frame["rank"] == first], rank=first) == _own(tmp_path, "misc.json.gz")
    second = frame[frame["rank"] == first + 1]
    assert _rows(second, count, None, 1, rank=first + 1) == _own(tmp_path, "cuda_graph.json.gz")
    assert events[other] == len(alone["traceEvents"]) and sum(events) == len(alone["traceEvents"]) + len(
        head["traceEvents"]
    )


def _describe(path: Path, rank: int | None = None):
    run = load_run(path)
    try:
        return run.ranks, run.describe(None, rank)
    finally:
        run.close()


@pytest.mark.parametrize("header_rank", [None, 2])
def test_each_pasted_process_is_a_rank_of_its_own(tmp_path, header_rank):
    """The processes in the order the file holds them: the header's distributedInfo.rank (0 where it names none),
    the next rank and so on; each rank's rows, summary and rank column are its own trace's."""
    path, count = _paste(tmp_path, "misc.json.gz", "cuda_graph.json.gz")
    if header_rank is not None:
        head = json.loads(path.read_text())
        head["distributedInfo"] = {"rank": header_rank, "world_size": 4}
        path.write_text(json.dumps(head))
    first = header_rank or 0
    run = load_run(path)
    try:
        assert run.ranks == [first, first + 1]
        ranks = run.sql("SELECT rank, min(event_id) AS low, max(event_id) AS high FROM kernels GROUP BY 1 ORDER BY 1")
        assert ranks["rank"].tolist() == [first, first + 1]
        assert ranks["high"][0] < count <= ranks["low"][1], "each rank's rows are its own process's"
        by_rank = run.sql("SELECT rank, count(*) AS n FROM events GROUP BY rank ORDER BY 1")
        assert by_rank["n"].sum() == len(json.loads(path.read_text())["traceEvents"])
        pasted = _rows(run.profiling_df(), count, None, 1, rank=first + 1)
    finally:
        run.close()
    own = tmp_path / "own.json"
    own.write_bytes(gzip.decompress((TRACES / "cuda_graph.json.gz").read_bytes()))
    assert pasted == _rows(_frame(own))
    _, second = _describe(path, first + 1)
    _, alone = _describe(own)
    assert second.equals(alone)


@pytest.mark.parametrize("gzipped", [False, True], ids=["json", "gzip members"])
def test_traces_concatenated_into_one_file_are_refused_saying_what_to_do(tmp_path, gzipped):
    """`cat rank0.json rank1.json > job.json` (or of their .json.gz): two JSON documents, not one trace."""
    first, second = (gzip.decompress((TRACES / name).read_bytes()) for name in ("misc.json.gz", "threads.json.gz"))
    path = tmp_path / ("job.json.gz" if gzipped else "job.json")
    path.write_bytes(gzip.compress(first) + gzip.compress(second) if gzipped else first + b"\n" + second)
    joined = first + (b"" if gzipped else b"\n") + second
    start = len(joined) - len(second) + second.index(b"{")
    line, column = joined.count(b"\n", 0, start) + 1, start - joined.rfind(b"\n", 0, start)
    problem = (
        rf"holds several JSON documents one after another, the second at line {line} column {column} \(traces"
        r" concatenated into one file\?\): write each trace to a file of its own, in one folder, and load the folder"
        r" \(each file is the rank its distributedInfo.rank names\)"
    )
    with pytest.raises(BadInputError, match=rf"job.json(.gz)?: {problem}$"):
        load_run(path)


def test_the_rank_column_of_a_pasted_file_is_an_integer_as_any_trace_s(tmp_path):
    """Ranks are 32-bit in every table: the processes' ranks (the header's plus each one's number) too."""
    path, _ = _paste(tmp_path, "misc.json.gz", "cuda_graph.json.gz")
    head = json.loads(path.read_text())
    head["distributedInfo"] = {"rank": 2**31 - 2}  # its two processes take the last two ranks
    path.write_text(json.dumps(head))
    run = load_run(path)
    try:
        assert run.ranks == [2**31 - 2, 2**31 - 1]
        types = run.sql("SELECT DISTINCT data_type FROM duckdb_columns() WHERE column_name = 'rank'")
        assert types["data_type"].tolist() == ["INTEGER"]
    finally:
        run.close()


def test_a_header_rank_whose_processes_run_past_the_largest_rank_is_refused(tmp_path):
    path, _ = _paste(tmp_path, "misc.json.gz", "cuda_graph.json.gz")
    head = json.loads(path.read_text())
    head["distributedInfo"] = {"rank": 2**31 - 1}
    path.write_text(json.dumps(head))
    problem = (
        r"holds the traces of 2 processes pasted into one file, ranked from its distributedInfo.rank 2147483647:"
        r" the last one's rank, 2147483648, is past 2147483647"
    )
    with pytest.raises(BadInputError, match=rf"pasted.json: {problem}$"):
        load_run(path)
