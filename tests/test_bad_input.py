"""Bad input beyond what test_cli.py covers (docs/errors.md): ill-typed and inconsistent events, run
directories with a missing or malformed file. Each is one line on stderr naming the file and the fault,
exit code 2, no traceback; the messages name the offending event by its index in traceEvents."""

import gzip
import itertools
import json
import os
import shutil
import subprocess

import pytest
from conftest import REPO, make_job
from kernelscope.analyzer import BadInputError, KernelscopeError, ingest, load_run

RUN = REPO / "sample_traces" / "mlp"  # a real H200 run: 6 kernels, 8 launches, 2 linear samples
EVENTS = json.loads(gzip.decompress((RUN / "trace.json.gz").read_bytes()))


def _index(cat, nth=0):
    return [i for i, e in enumerate(EVENTS["traceEvents"]) if e.get("cat") == cat and e.get("ph") == "X"][nth]


def _trace(tmp_path, change):
    doc = json.loads(json.dumps(EVENTS))
    change(doc["traceEvents"])
    path = tmp_path / f"bad-{next(_names)}.json"
    path.write_text(json.dumps(doc))
    return path


def _set(index, key, value):
    def change(events):
        events[index][key] = value

    return change


def _set_arg(index, key, value):
    def change(events):
        events[index]["args"][key] = value

    return change


def _drop(index, key, in_args=False):
    def change(events):
        (events[index]["args"] if in_args else events[index]).pop(key)

    return change


def _without_flow(index, change):
    """``change``, and the flow arrow that finishes on the device event at ``index`` unmatched: by its flow, a device
    event without a correlation reaches its launch (linked_by_flow.sql)."""

    def without(events):
        flow = events[index]["args"]["correlation"]
        for e in events:
            if e.get("ph") == "f" and e.get("id") == flow:
                e["id"] = -1
        change(events)

    return without


_names = itertools.count()
K, L = _index("kernel"), _index("cuda_runtime")
KERNEL = f"traceEvents[{K}] (kernel 'nvjet"


def _copy_of_run(tmp_path, change):
    run = tmp_path / f"run-{next(_names)}"
    shutil.copytree(RUN, run)
    change(run)
    return run


def _edit_json(name, change):
    def edit(run):
        doc = json.loads((run / name).read_text())
        change(doc)
        (run / name).write_text(json.dumps(doc))

    return edit


def _edit_trace(change):
    def edit(run):
        doc = json.loads(gzip.decompress((run / "trace.json.gz").read_bytes()))
        change(doc["traceEvents"])
        (run / "trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))

    return edit


def _set_in(path, value):
    def change(doc):
        *parents, last = path
        for key in parents:
            doc = doc[key]
        doc[last] = value

    return change


def _set_list(index, value):
    def change(events):
        events[index] = value

    return change


def _duplicate(index):
    return lambda events: events.append(dict(events[index]))


def _gone(name):
    return lambda run: (run / name).unlink()


# name -> builder(tmp_path) of (bad input, where its message points, the fault it names)
TRACE_CASES = {
    "string ts": lambda tmp_path: (_trace(tmp_path, _set(K, "ts", "soon")), KERNEL, 'has ts "soon", not a number'),
    "list ts": lambda tmp_path: (_trace(tmp_path, _set(K, "ts", [1])), KERNEL, "has ts [1], not a number"),
    "missing ts": lambda tmp_path: (_trace(tmp_path, _drop(K, "ts")), KERNEL, "has no numeric ts"),
    "negative dur": lambda tmp_path: (
        _trace(tmp_path, _set(K, "dur", -5.248)),
        KERNEL,
        "has a negative dur (-5.248 µs)",
    ),
    "missing dur": lambda tmp_path: (_trace(tmp_path, _drop(K, "dur")), KERNEL, "has no numeric dur"),
    "missing correlation": lambda tmp_path: (
        _trace(tmp_path, _without_flow(K, _drop(K, "correlation", True))),
        KERNEL,
        "has no args.correlation",
    ),
    "string correlation": lambda tmp_path: (
        _trace(tmp_path, _set_arg(K, "correlation", "x1")),
        KERNEL,
        'has args.correlation "x1", not an integer',
    ),
    "launch without correlation": lambda tmp_path: (
        _trace(tmp_path, _drop(L, "correlation", True)),
        f"traceEvents[{L}] (cuda_runtime 'cudaLaunchKernel')",
        "has no args.correlation",
    ),
    "device event not complete": lambda tmp_path: (
        _trace(tmp_path, _set(K, "ph", "n")),
        KERNEL,
        'whose ph is "n", not "X"',
    ),
    "span begun and never ended": lambda tmp_path: (
        _trace(tmp_path, _set(K, "ph", "B")),
        KERNEL,
        'begins a span ("ph": "B") that no "E" event of its thread (pid, tid) ends',
    ),
    "launch on a thread that is an object": lambda tmp_path: (
        _trace(tmp_path, _set(L, "tid", {"thread": 7})),
        f"traceEvents[{L}] (cuda_runtime",
        "has a pid or tid that is missing or neither an integer nor a string",
    ),
    "kernel without name": lambda tmp_path: (
        _trace(tmp_path, _drop(K, "name")),
        f"traceEvents[{K}] (kernel) has no name",
        "",
    ),
    "event not an object": lambda tmp_path: (
        _trace(tmp_path, _set_list(3, 7)),
        "traceEvents[3]",
        "is a JSON number, not an event",
    ),
    "duplicated launch correlation": lambda tmp_path: (
        _trace(tmp_path, _duplicate(L)),
        f"traceEvents[{len(EVENTS['traceEvents'])}] (cuda_runtime 'cudaLaunchKernel')",
        f"shares correlation {EVENTS['traceEvents'][L]['args']['correlation']} with another launch of its runtime, "
        f"traceEvents[{L}]",
    ),
    # CUPTI numbers CUDA's runtime and driver calls from one counter (CUpti_ActivityAPI.correlationId: "each function
    # invocation is assigned a unique correlation ID"): a driver call that shares a runtime call's is a broken trace
    "launch correlation shared with a CUDA driver call": lambda tmp_path: (
        _trace(tmp_path, lambda events: events.append({**events[L], "cat": "cuda_driver", "name": "cuLaunchKernel"})),
        f"traceEvents[{len(EVENTS['traceEvents'])}] (cuda_driver 'cuLaunchKernel')",
        f"shares correlation {EVENTS['traceEvents'][L]['args']['correlation']} with another launch of its runtime, "
        f"traceEvents[{L}]",
    ),
    "duplicated device event": lambda tmp_path: (
        _trace(tmp_path, _duplicate(K)),
        f"traceEvents[{len(EVENTS['traceEvents'])}] (kernel",
        f"repeats device event traceEvents[{K}]",
    ),
    "launch correlation reused by another launch": lambda tmp_path: (
        _trace(
            tmp_path,
            _set_arg(_index("cuda_runtime", 1), "correlation", EVENTS["traceEvents"][L]["args"]["correlation"]),
        ),
        f"traceEvents[{max(L, _index('cuda_runtime', 1))}]",
        "with another launch",
    ),
}


def _file(tmp_path, name, doc):
    """``doc`` as JSON in ``name`` (gzip-compressed where it ends in .gz)."""
    path, data = tmp_path / name, json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


# torch.profiler's files that are not Kineto traces: an ExecutionTraceObserver's graph, a memory timeline's arrays
EXECUTION_TRACE = {
    "schema": "1.0.2-chakra.0.0.4",
    "pid": 1,
    "time": "2024-01-01 00:00:00",
    "start_ts": 100,
    "nodes": [{"name": "[pytorch|profiler|execution_trace|process]", "id": 1, "rf_id": 0, "parent": 0, "inputs": {}}],
    "finish_ts": 200,
}
TRACE_CASES |= {
    "execution trace": lambda tmp_path: (
        _file(tmp_path, "benchmark_simple_add_et.json.gz", EXECUTION_TRACE),
        "benchmark_simple_add_et.json.gz",
        "is a PyTorch Execution Trace (nodes, no traceEvents), not a Kineto trace",
    ),
    "memory timeline": lambda tmp_path: (
        _file(tmp_path, "memory_timeline.raw.gz", [[1.5, 2.5], [[0, 64], [64, 0]]]),
        "memory_timeline.raw.gz",
        "is JSON but not a Kineto/Chrome trace (an array of arrays, not of events)",
    ),
}


def _encoded(tmp_path, encoding):
    """The mlp trace as text in ``encoding`` (an editor's "save as"), not the UTF-8 that JSON files are."""
    path = tmp_path / f"{encoding}.json"
    path.write_text(json.dumps(EVENTS), encoding=encoding)
    return path


TRACE_CASES |= {
    f"trace in {encoding}": lambda tmp_path, encoding=encoding: (
        _encoded(tmp_path, encoding),
        f"{encoding}.json",
        f"is {encoding[:6].upper()} text, not the UTF-8 JSON of a trace",
    )  # UTF-32-LE's byte order mark begins with UTF-16-LE's: named UTF-16, it was
    for encoding in ("utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be")
}
RUN_CASES = {
    "run without samples.json": lambda tmp_path: (
        _copy_of_run(tmp_path, _gone("samples.json")),
        "run-",
        "missing its samples.json",
    ),
    "run without manifest": lambda tmp_path: (
        _copy_of_run(tmp_path, _gone("manifest.json")),
        "run-",
        "no manifest.json",
    ),
    "run with a corrupt manifest": lambda tmp_path: (
        _copy_of_run(tmp_path, lambda run: (run / "manifest.json").write_text('{"format_version": 1,')),
        "manifest.json",
        "is not valid JSON",
    ),
    "manifest without version": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", lambda doc: doc.pop("format_version"))),
        "manifest.json",
        "no integer format_version",
    ),
    "manifest naming a file outside the run": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["files", "trace"], "../../etc/passwd"))),
        "manifest.json",
        "names files.trace '../../etc/passwd', which is not a file name inside the run directory",
    ),
    "manifest with a malformed annotation": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["annotation"], ["ks.module:"]))),
        "manifest.json",
        "has a field 'annotation' that is not a JSON object",
    ),
    "manifest with an empty prefix": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["annotation", "function_prefix"], ""))),
        "manifest.json",
        "has annotation.function_prefix '', not a non-empty string",
    ),
    "manifest with a malformed TorchScript map": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["annotation", "torchscript_modules"], {"": [1]}))),
        "manifest.json",
        "has annotation.torchscript_modules that is not an object of objects of strings",
    ),
    "newer sample store": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("samples.json", _set_in(["format_version"], 7))),
        "samples.json",
        "has format version 7, newer than this kernelscope reads",
    ),
    "sample store with a malformed tensor": lambda tmp_path: (
        _copy_of_run(
            tmp_path,
            _edit_json(
                "samples.json", lambda doc: doc["functions"]["linear"][0]["args"]["tuple"][0]["tensor"].pop("shape")
            ),
        ),
        "samples.json",
        "has a malformed sample 0 of function 'linear' (no 'shape')",
    ),
    "sample store with an unknown tag": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("samples.json", _set_in(["functions", "linear", 1, "kwargs"], {"set": [1]}))),
        "samples.json",
        "has a malformed sample 1 of function 'linear' (unknown sample value tag 'set')",
    ),
    "sample store with repeated sample ids": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("samples.json", _set_in(["functions", "linear", 1, "sample_id"], 0))),
        "samples.json",
        "has sample ids of function 'linear' that are not 0, 1, 2",
    ),
    "sample store with a string call count": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("samples.json", _set_in(["functions", "linear", 0, "calls"], "1"))),
        "samples.json",
        "has a call count of function 'linear' that is not a positive integer",
    ),
    "sample store of another run": lambda tmp_path: (
        _copy_of_run(
            tmp_path,
            _edit_json(
                "samples.json", lambda doc: doc["functions"].__setitem__("linear", doc["functions"]["linear"][:1])
            ),
        ),
        "trace.json.gz",
        "names sample 1 of 'linear', which samples.json does not hold",
    ),
    "run with a broken name escape": lambda tmp_path: (
        _copy_of_run(
            tmp_path,
            lambda run: (
                _edit_json("manifest.json", _set_in(["annotation", "name_escape"], "percent"))(run),
                _edit_trace(_set(1, "name", "ks.module:caf%C3"))(run),  # half of "é"
            ),
        ),
        "trace.json.gz",
        "traceEvents[1] ('ks.module:caf%C3') has a %-escape that is not UTF-8",
    ),
    "run with a truncated trace": lambda tmp_path: (
        _copy_of_run(
            tmp_path,
            lambda run: (run / "trace.json.gz").write_bytes((RUN / "trace.json.gz").read_bytes()[:1500]),
        ),
        "trace.json.gz",
        "cannot be decompressed or read",
    ),
}


def _cli(*args) -> subprocess.CompletedProcess:
    """The command run in this process, as ``kernelscope ARGS`` runs it (the group's handling of errors and exit
    codes): a process each, 0.85 s, made this file 40 s of the suite; test_cli.py runs the bad inputs' command as a
    process of its own."""
    from click.testing import CliRunner
    from kernelscope.cli import main

    done = CliRunner().invoke(main, list(map(str, args)), prog_name="kernelscope")
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return subprocess.CompletedProcess(args, done.exit_code, done.stdout, done.stderr)


@pytest.mark.parametrize("case", [*TRACE_CASES, *RUN_CASES])
def test_bad_input_is_one_line_naming_the_file_and_the_fault(case, tmp_path):
    path, where, problem = (TRACE_CASES | RUN_CASES)[case](tmp_path)
    done = _cli("analyze", path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"kernelscope: error: {path}")
    assert where in line and problem in line, line


@pytest.mark.parametrize(
    ("name", "by", "problem"),
    [
        ("trace.json.gz", "directory", "is a directory, not a regular file"),
        ("samples.json", "directory", "is a directory, not a regular file"),
        ("manifest.json", "directory", "is a directory, not a regular file"),
        ("rank-1/manifest.json", "directory", "is a directory, not a regular file"),
        ("trace.json.gz", "FIFO", "is a FIFO, not a regular file"),
        ("samples.json", "dangling link", "is a symbolic link to a file that does not exist"),
    ],
)
def test_a_file_of_a_run_directory_that_is_not_a_file_says_what_it_is(name, by, problem, tmp_path):
    """Something other than a regular file where a run directory (or a rank of a job) holds one of its files is
    named as what it is, not reported as missing (nor, for a rank's manifest, the rank left out unsaid)."""
    if name.startswith("rank-1/"):
        path = make_job(tmp_path / "job", {0: RUN, 1: RUN})
    else:
        path = tmp_path / "run"
        shutil.copytree(RUN, path)
    target = path / name
    target.unlink()
    if by == "directory":
        target.mkdir()
    elif by == "FIFO":
        os.mkfifo(target)
    else:
        target.symlink_to(path / "gone")
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    assert str(raised.value) == f"{path / name}: {problem}"


def test_sql_command_reports_bad_input_the_same_way(tmp_path):
    path = _trace(tmp_path, _set(K, "dur", -1))
    done = _cli("sql", path, "SELECT count(*) FROM kernels")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == f"kernelscope: error: {path}: {KERNEL}" + (
        f"{EVENTS['traceEvents'][K]['name'][len('nvjet') :]}') has a negative dur (-1.0 µs)"
    )


def test_every_bad_event_is_counted_in_the_message(tmp_path):
    def no_dur(events):
        for e in events:
            if e.get("cat") == "kernel":
                e.pop("dur")

    with pytest.raises(BadInputError, match=r"has no numeric dur \(duration\), and 5 other events the same way$"):
        load_run(_trace(tmp_path, no_dur))


def test_an_event_breaking_several_rules_counts_for_each(tmp_path):
    """Rules are checked in one pass, an event getting the first rule it breaks; the lowest rule broken is
    reported with every event that breaks it, also those that break a lower rule: here rule 2 (no dur) for
    the kernels, with rule 3 (a negative dur) on a runtime call and rule 1 (no ts) on none."""

    def breaks(events):
        kernels = [e for e in events if e.get("cat") == "kernel"]
        for e in kernels[:3]:
            e.pop("dur")
        launch = next(e for e in events if e.get("cat") == "cuda_runtime")
        launch["dur"] = -1

    with pytest.raises(BadInputError, match=r"has no numeric dur \(duration\), and 2 other events the same way$"):
        load_run(_trace(tmp_path, breaks))

    def no_ts_and_no_dur(events):
        kernels = [e for e in events if e.get("cat") == "kernel"]
        for e in kernels[:4]:
            e.pop("dur")
        for e in kernels[2:6]:
            e.pop("ts")

    with pytest.raises(BadInputError, match=r"has no numeric ts \(start\), and 3 other events the same way$"):
        load_run(_trace(tmp_path, no_ts_and_no_dur))


def test_a_numeric_string_ts_is_read_as_its_number(tmp_path):
    """The documented leniency: DuckDB casts "123.5" to 123.5; nothing is lost or misplaced."""
    path = _trace(tmp_path, _set(K, "ts", str(EVENTS["traceEvents"][K]["ts"])))
    with load_run(path) as bent, load_run(RUN / "trace.json.gz") as straight:
        assert bent.profiling_df().equals(straight.profiling_df())


WRAPPED_DUR = 18446744073709551.615  # Kineto's profiler span of an end before its start: an unsigned 64-bit wrap


def _wrapped_span(events):
    events.append(
        {
            "ph": "X",
            "cat": "Trace",
            "ts": 1.0,
            "dur": WRAPPED_DUR,
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "name": "PyTorch Profiler (0)",
            "args": {"Op count": 0},
        }
    )
    events.append({"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": WRAPPED_DUR})


@pytest.mark.parametrize("reader", ["native", "duckdb"])
def test_times_past_64_bits_load_where_no_rule_reads_them_and_are_refused_where_one_does(reader, tmp_path, monkeypatch):
    """A profiler span or an instant whose time no 64-bit nanoseconds hold loads with that time NULL, its kernels as
    they are; the same dur on a kernel is refused. By either reader (the native one leaves such parts to DuckDB's)."""
    if reader == "duckdb":
        monkeypatch.setattr(ingest, "native_reader", None)
    with load_run(_trace(tmp_path, _wrapped_span)) as wrapped, load_run(RUN / "trace.json.gz") as straight:
        assert wrapped.profiling_df().equals(straight.profiling_df())
        spans = wrapped.con.execute("SELECT ts_ns, dur_ns FROM events WHERE cat = 'Trace' OR ph = 'i'").fetchall()
        assert (1000, None) in spans and (None, None) in spans
    with pytest.raises(BadInputError, match=r"has dur 1844674407370955[0-9.e+]*, not a number of microseconds$"):
        load_run(_trace(tmp_path, _set(K, "dur", WRAPPED_DUR)))


def test_the_real_traces_break_no_rule():
    """The rules reject nothing that torch.profiler writes (every real trace of the repository, the external ones
    too): validate.sql's every rule, its pass over every event included (the native reader's pre-check skips that
    pass when it counted no event breaking rules 1-7), and the pre-check agrees."""
    from kernelscope.analyzer.sql import sql_text

    paths = sorted(REPO.glob("sample_traces/*/trace.json.gz")) + sorted(REPO.glob("sample_traces/plain_kineto/*.gz"))
    paths += sorted(REPO.glob("sample_traces/external/*.json*"))
    assert len(paths) >= 22
    zero_durations = 0
    for path in paths:
        with load_run(path, allow_empty=True) as run:
            run.con.execute("SET VARIABLE ks_rows_checked = false")
            assert run.con.execute(sql_text("validate.sql")).fetchone() is None, path
            # roctracer's launches name their stream "0x0", a join key the native reader leaves to DuckDB's reader,
            # and link their kernels by External id alone (rule 5, until linked_by_external_id.sql)
            relinked = (  # no correlation
                "tl_mi300_roctracer_gemm.json",
                "torch_inductor_test_analysis_excerpt.json",
                "tl_eval_moe_01.json",
            )
            assert run.header.all_rows_checked or path.name in relinked, path
            zero_durations += run.con.execute("SELECT count(*) FROM events WHERE ph = 'X' AND dur_ns = 0").fetchone()[0]
    assert zero_durations > 0, "events of dur 0 are among them (rule 3 refuses only a negative dur)"


def test_a_device_event_repeats_another_only_on_its_stream(tmp_path):
    """Rule 9's key is (correlation, device, stream, start): the same kernel on another stream is another event."""

    def on_two_streams(events):
        copy = json.loads(json.dumps(events[K]))
        copy["args"]["stream"] = events[K]["args"]["stream"] + 1
        events.append(copy)

    with load_run(_trace(tmp_path, on_two_streams)) as run:
        assert len(run.profiling_df()) == len(load_run(RUN).profiling_df()) + 1
    with pytest.raises(BadInputError, match=rf"repeats device event traceEvents\[{K}\]"):
        load_run(_trace(tmp_path, _duplicate(K)))


def test_a_trace_with_no_device_events_is_refused_by_the_cli_and_empty_with_allow_empty(tmp_path):
    def cpu_only(events):
        events[:] = [e for e in events if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset", "cpu_op")]

    path = _trace(tmp_path, cpu_only)
    done = _cli("analyze", path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"kernelscope: error: {path}: holds no device events (kernel, memcpy, memset) and no CPU operators"
    )
    with load_run(path, allow_empty=True) as run:
        assert run.profiling_df().empty and run.describe().empty


def test_an_unreadable_file_is_bad_input(monkeypatch):
    """Permission denied (what a non-root user gets; simulated, since CI runs as root) names the file."""
    import errno

    from kernelscope.analyzer import rank_parts

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(rank_parts, "ingest_trace", refuse)
    with pytest.raises(BadInputError, match=r"mlp/trace\.json\.gz: cannot be read \(Permission denied\)$"):
        load_run(RUN)
    from kernelscope.analyzer import rundir

    monkeypatch.setattr(rundir, "open", refuse, raising=False)  # what reads the manifest and the sample store
    with pytest.raises(BadInputError, match=r"mlp/manifest\.json: cannot be read \(Permission denied\)$"):
        load_run(RUN)


def test_a_clean_trace_checked_by_the_native_reader_skips_the_query_that_names_faults(tmp_path, monkeypatch):
    """validate.sql names the first unusable event, and costs more to plan than a small trace's whole check: where
    the native reader checked the rows (rules 1-7) and found no repeat in a trace it read as one part, neither it nor
    validate_repeats.sql is run; a trace with a repeat still gets its sentence (the cases above)."""
    from kernelscope.analyzer import ingest, validate

    if ingest.native_reader is None:
        pytest.skip("the native reader is not built")
    asked = []
    run_sql_file = validate.run_sql_file
    monkeypatch.setattr(validate, "run_sql_file", lambda con, name: asked.append(name) or run_sql_file(con, name))
    load_run(RUN).close()
    assert asked == []
    with pytest.raises(BadInputError, match="repeats device event"):
        load_run(_trace(tmp_path, _duplicate(K)))
    assert asked == ["validate.sql"], "the reader found the repeat: only the query that names it runs"


def test_a_folder_of_runs_is_named_as_one_and_its_runs_listed(tmp_path):
    """A folder that holds run directories (a user's runs/, the repository's sample_traces/) is no run: the
    message lists them and says to give one, where it read 'no manifest.json' or, with a folder of traces beside
    them, spoke of the traces' ranks."""
    for name in ("base", "new"):
        shutil.copytree(RUN, tmp_path / "runs" / name)
    (tmp_path / "runs" / "notes").mkdir()
    with pytest.raises(BadInputError) as raised:
        load_run(tmp_path / "runs")
    assert str(raised.value) == (
        f"{tmp_path / 'runs'}: is a folder of run directories (base, new), not a run: give one of them"
    )
    (tmp_path / "runs" / "external").mkdir()
    shutil.copy(RUN / "trace.json.gz", tmp_path / "runs" / "external" / "a.json.gz")
    shutil.copy(RUN / "trace.json.gz", tmp_path / "runs" / "external" / "b.json.gz")
    with pytest.raises(BadInputError, match=r"is a folder of run directories \(base, new\), not a run"):
        load_run(tmp_path / "runs")


def test_an_archive_given_to_load_run_is_named_as_one(tmp_path):
    """load_run(ARCHIVE) read 'is not a kernelscope run directory (no manifest.json)' of the folder it had made."""
    from kernelscope.analyzer import archive_runs

    archive_runs([RUN], tmp_path / "archive")
    with pytest.raises(BadInputError) as raised:
        load_run(tmp_path / "archive")
    assert str(raised.value) == (
        f"{tmp_path / 'archive'}: is an archive, not a run: Archive(path).run(ID) opens one of its runs"
    )


def test_a_closed_run_says_so_when_queried_and_closes_twice_quietly():
    """A Run used after its with block raised DuckDB's 'Connection Error: Connection already closed!'."""
    with load_run(RUN) as run:
        pass
    for query in (run.describe, run.profiling_df, lambda: run.sql("SELECT 1"), run.tree):
        with pytest.raises(KernelscopeError, match=r": is closed \(its with block ended, or close\(\) was called\)"):
            query()
    run.close()
    assert repr(run).endswith(", closed)")


def test_sql_with_the_query_first_says_the_run_comes_first(tmp_path):
    """`kernelscope sql QUERY RUN`, the two swapped, names the order instead of only calling the query a missing
    file."""
    done = _cli("sql", "SELECT count(*) FROM kernels", RUN)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "kernelscope: error: SELECT count(*) FROM kernels: no such run directory or trace file; "
        "the run comes first: kernelscope sql RUN QUERY"
    )


def test_a_dash_for_standard_input_says_a_trace_is_read_from_a_file(tmp_path, monkeypatch):
    """`zcat t.json.gz | kernelscope analyze -`: "-: no such run directory or trace file" alone left the user to
    guess that stdin is not read (a trace is cut into parts by its offsets: it needs a file)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInputError, match=r"^-: no such run directory or trace file; a trace is read from a file"):
        load_run("-")
