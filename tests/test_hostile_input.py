"""Hostile input (docs/errors.md), through analyze and archive in-process: out-of-range and ill-typed manifest fields
and ranks, nesting past what any reader takes back, duplicate or huge rank directories, files that are not regular
or cannot be read, control characters in a trace. Each is one printable line naming the file, exit code 2, and an
archive left without a run or a staging folder."""

import json
import os
import shutil

import pytest
from test_bad_input import EVENTS, RUN, K, _copy_of_run, _edit_json, _names, _set_in, _trace


def _nested(levels, leaf):
    """``levels`` tagged lists around ``leaf``: 2 JSON levels each."""
    for _ in range(levels):
        leaf = {"list": [leaf]}
    return leaf


def _job_of(tmp_path, names):
    job = tmp_path / f"job-{next(_names)}"
    for name in names:
        shutil.copytree(RUN, job / name)
    return job


def _linked(target, name="trace.json"):
    def link(run):
        (run / name).unlink(missing_ok=True)
        (run / name).symlink_to(target)

    return link


def _header_trace(tmp_path, info):
    doc = json.loads(json.dumps(EVENTS))
    doc["distributedInfo"] = info
    path = tmp_path / f"header-{next(_names)}.json"
    path.write_text(json.dumps(doc))
    return path


def _fifo(tmp_path):
    path = tmp_path / f"fifo-{next(_names)}.json"
    os.mkfifo(path)
    return path


def _bytes_of(tmp_path, name, change):
    """The trace of RUN as ``name``, its JSON text changed by ``change`` (bytes to bytes), gzipped for ``.gz``."""
    import gzip

    path = tmp_path / f"{next(_names)}-{name}"
    text = change(json.dumps(EVENTS).encode())
    path.write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    return path


def _after_gzip(tmp_path, tail, shown, zeros=0, blanks=0):
    """The trace of RUN gzipped, ``tail`` after it: the case of HOSTILE_CASES, whose message says where the garbage
    after the gzip data begins (after the zeros gzip readers skip, and the ``blanks`` that would be read past) and
    what it is."""
    path = tmp_path / f"{next(_names)}-tail.json.gz"
    data = __import__("gzip").compress(json.dumps(EVENTS).encode())
    path.write_bytes(data + tail)
    offset = len(data) + zeros + blanks
    where = f"bytes after a gzip member at byte {offset}, {shown}, are not gzip: garbage after the data"
    return path, "tail.json.gz", f"cannot be decompressed or read ({where})"


def _bare_array(text):
    """The trace's events as a bare array (the Chrome format allows it), which is parsed whole."""
    return json.dumps(json.loads(text)["traceEvents"]).encode()


def _first_kernel_name(text, by):
    return text.replace(b'"nvjet', b'"nv' + by + b"jet", 1)


# name -> builder(tmp_path) of (bad input, where its message points, the fault it names); read by analyze and archive
HOSTILE_CASES = {
    "manifest rank past 2**31": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["rank"], 2**31))),
        "manifest.json",
        "has rank 2147483648, not an integer from 0 to 2147483647",
    ),
    "manifest files.trace null": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["files", "trace"], None))),
        "manifest.json",
        "names files.trace null, which is not a file name inside the run directory",
    ),
    "manifest files.trace with a NUL byte": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["files", "trace"], "trace\x00.json.gz"))),
        "manifest.json",
        "names files.trace 'trace\\x00.json.gz', which is not a file name inside the run directory",
    ),
    "manifest files.samples a list": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["files", "samples"], ["samples.json"]))),
        "manifest.json",
        'names files.samples ["samples.json"], which is not a file name inside the run directory',
    ),
    "manifest format version 0": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["format_version"], 0))),
        "manifest.json",
        "has format version 0, which no kernelscope writes",
    ),
    "a bare array of events with a quote inside a name (parsed whole)": lambda tmp_path: (
        _bytes_of(tmp_path, "quoted.json", lambda text: _first_kernel_name(_bare_array(text), b'say "hi"')),
        "quoted.json",
        'is not valid JSON (an unescaped quote (") inside a string, which ends it early, at byte ',
    ),
    "a gzip trace gzipped again": lambda tmp_path: (
        _bytes_of(tmp_path, "twice.json.gz", __import__("gzip").compress),
        "twice.json.gz",
        "is not valid JSON (it decompresses to gzip-compressed data, not JSON: it was compressed twice)",
    ),
    "a zstd file named .json": lambda tmp_path: (
        _bytes_of(tmp_path, "zstd.json", lambda text: b"\x28\xb5\x2f\xfd" + text),
        "zstd.json",
        "is not valid JSON (it is zstd-compressed data: decompress it, or gzip it (.json.gz))",
    ),
    "a manifest that is not UTF-8": lambda tmp_path: (
        _copy_of_run(
            tmp_path, lambda run: (run / "manifest.json").write_bytes(b'{"format_version": 1, "hostname": "v\xffm"}')
        ),
        "manifest.json",
        "is not valid JSON (byte 0xff at line 1 column 37 is not UTF-8)",
    ),
    "text after the trace object (a file rewritten in place by a shorter one)": lambda tmp_path: (
        _bytes_of(tmp_path, "rewritten.json", lambda text: text + b'GARBAGE{["'),
        "rewritten.json",
        "is not valid JSON (unexpected content after document: line 1 column ",
    ),
    "a trace cut short inside an event's array of objects": lambda tmp_path: (
        _bytes_of(tmp_path, "cut.json", lambda text: text[: text.rindex(b"}, {") + 4] + b'"args": {"x": [{"a": 1}]}'),
        "cut.json",
        "the JSON ends before the trace object is complete (truncated or corrupt)",
    ),
    "garbage after a gzip member": lambda tmp_path: _after_gzip(tmp_path, b"GARBAGEGARBAGE", "b'GARBAGEG'…"),
    "fewer bytes than a gzip header after a gzip member, after zeros": lambda tmp_path: _after_gzip(
        tmp_path, b"\0\0GARBA", "b'GARBA'", zeros=2
    ),
    "a byte after a gzip member": lambda tmp_path: _after_gzip(tmp_path, b"x", "b'x'"),
    "a newline and a byte after a gzip member": lambda tmp_path: _after_gzip(tmp_path, b"\nx", "b'x'", blanks=1),
    "2 MiB of blanks and a byte after a gzip member": lambda tmp_path: _after_gzip(
        tmp_path, b" \0\n" * (700 << 10) + b"x", "b'x'", blanks=3 * (700 << 10)
    ),
    "half a gzip magic after a gzip member": lambda tmp_path: _after_gzip(tmp_path, b"\x1f", "b'\\x1f'"),
    "manifest rank true": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["rank"], True))),
        "manifest.json",
        "has rank true, not an integer from 0 to 2147483647",
    ),
    "manifest world size of 10**12": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["world_size"], 10**12))),
        "manifest.json",
        "has world_size 1000000000000, not an integer from 1 to 2147483647",
    ),
    "manifest rank past its world size": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", lambda doc: doc.update(rank=3, world_size=2))),
        "manifest.json",
        "has rank 3, not below its world_size 2",
    ),
    "command line a string": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["command_line"], "python train.py"))),
        "manifest.json",
        'has command_line "python train.py", not a list of strings',
    ),
    "command line a number": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["command_line"], 7))),
        "manifest.json",
        "has command_line 7, not a list of strings",
    ),
    "tags nested 300 deep": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["tags"], _nested(150, 1)))),
        "manifest.json",
        "is nested deeper than 100 levels",
    ),
    "sample arguments nested 400 deep": lambda tmp_path: (
        _copy_of_run(
            tmp_path, _edit_json("samples.json", _set_in(["functions", "linear", 1, "args"], _nested(200, 1)))
        ),
        "samples.json",
        "has a malformed sample 1 of function 'linear' (nested deeper than 64 levels)",
    ),
    "manifest gpu_name a list": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["gpu_name"], ["H200"]))),
        "manifest.json",
        'has gpu_name ["H200"], not a string',
    ),
    "manifest torch_version a number": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["torch_version"], 2.11))),
        "manifest.json",
        "has torch_version 2.11, not a string",
    ),
    "manifest sample_memory a list": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["sample_memory"], [1]))),
        "manifest.json",
        "has sample_memory [1], not a JSON object",
    ),
    "manifest sample_tensors.bytes a string": lambda tmp_path: (
        _copy_of_run(tmp_path, _edit_json("manifest.json", _set_in(["sample_tensors"], {"bytes": "1 GB"}))),
        "manifest.json",
        'has sample_tensors.bytes "1 GB", not a number >= 0',
    ),
    "sample calls adding up past 2**63": lambda tmp_path: (
        _copy_of_run(
            tmp_path,
            _edit_json("samples.json", lambda doc: [e.update(calls=2**63 - 1) for e in doc["functions"]["linear"][:2]]),
        ),
        "samples.json",
        "has calls or tensor bytes of function 'linear' that add up past 9223372036854775807 (64 bits)",
    ),
    "sample tensor bytes adding up past 2**63": lambda tmp_path: (
        _copy_of_run(
            tmp_path,
            _edit_json(
                "samples.json",
                lambda doc: [a["tensor"].update(nbytes=2**62) for a in doc["functions"]["linear"][0]["args"]["tuple"]],
            ),
        ),
        "samples.json",
        "has calls or tensor bytes of function 'linear' that add up past",
    ),
    "sample object whose repr is a list": lambda tmp_path: (
        _copy_of_run(
            tmp_path,
            _edit_json(
                "samples.json", _set_in(["functions", "linear", 1, "kwargs"], {"object": {"type": 1, "repr": [1]}})
            ),
        ),
        "samples.json",
        "has a malformed sample 1 of function 'linear' (an object needs strings type and repr)",
    ),
    "sample tuple of a string": lambda tmp_path: (
        _copy_of_run(
            tmp_path, _edit_json("samples.json", _set_in(["functions", "linear", 0, "args"], {"tuple": "ab"}))
        ),
        "samples.json",
        "has a malformed sample 0 of function 'linear' (a value tagged 'tuple' holds a JSON string, not an array)",
    ),
    "distributedInfo.rank past 2**31": lambda tmp_path: (
        _header_trace(tmp_path, {"rank": 2**31 + 5}),
        ".json",
        "has distributedInfo.rank 2147483653, not an integer from 0 to 2147483647",
    ),
    "distributedInfo.rank true": lambda tmp_path: (
        _header_trace(tmp_path, {"rank": True}),
        ".json",
        "has distributedInfo.rank true, not an integer",
    ),
    "rank directory past 2**31": lambda tmp_path: (
        _job_of(tmp_path, ["rank-99999999999"]),
        "rank-99999999999",
        "is named for rank 99999999999, not a rank from 0 to 2147483647",
    ),
    "rank-0 and rank-00": lambda tmp_path: (
        _job_of(tmp_path, ["rank-0", "rank-00"]),
        "job-",
        "holds rank 0 twice (rank-0 and rank-00)",
    ),
    "trace linked to /proc/self/mem": lambda tmp_path: (
        _copy_of_run(tmp_path, lambda run: _linked("/proc/self/mem", "trace.json.gz")(run)),
        "trace.json.gz",
        "the file is empty",
    ),
    "sample store linked to /proc/self/mem": lambda tmp_path: (
        _copy_of_run(tmp_path, _linked("/proc/self/mem", "samples.json")),
        "samples.json",
        "cannot be read (Input/output error)",
    ),
    "a FIFO": lambda tmp_path: (_fifo(tmp_path), "fifo-", "is not a regular file"),
    "control characters in an event's cat": lambda tmp_path: (
        _trace(tmp_path, lambda events: events[K].update(ts="soon", cat="kernel\x1b]0;owned\x07\n2nd line\u202e")),
        f"traceEvents[{K}] (kernel\\x1b]0;owned\\x07\\n2nd line\\u202e 'nvjet",
        'has ts "soon"',
    ),
}


def _in_process(*args):
    from click.testing import CliRunner
    from kernelscope.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("command", ["analyze", "archive"])
@pytest.mark.parametrize("case", HOSTILE_CASES)
def test_hostile_input_is_one_line_naming_the_file_and_the_fault(case, command, tmp_path):
    path, where, problem = HOSTILE_CASES[case](tmp_path)
    args = ["archive", path, "--to", tmp_path / "archive"] if command == "archive" else ["analyze", path]
    done = _in_process(*args)
    assert done.exit_code == 2 and isinstance(done.exception, SystemExit), done.exception
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"kernelscope: error: {path}") and line.isprintable(), line
    assert where in line and problem in line, line
    if command == "archive":
        assert not (tmp_path / "archive" / ".staging").exists() and not (tmp_path / "archive" / "runs").exists()


def test_a_ragged_shape_with_a_stride_is_shown_with_its_stride(tmp_path):
    """The recorder writes a nested tensor's stride null; a store that gives one with a ragged size still loads, and
    its signature shows the stride (no contiguous stride to compare it with)."""
    from kernelscope.analyzer import load_run

    def ragged(doc):
        doc["functions"]["linear"][0]["args"]["tuple"][0]["tensor"].update(shape=[None, 1024], stride=[1024, 1])

    with load_run(_copy_of_run(tmp_path, _edit_json("samples.json", ragged))) as run:
        signature = run.sql("SELECT signature FROM samples WHERE function_name = 'linear' AND sample_id = 0").iat[0, 0]
    assert signature.startswith("(float16[*,1024]{1024,1}@cuda:0, ")


@pytest.mark.parametrize("properties", [5, {"0": {"name": "H200"}}, [{"name": ["H200"]}], [[1], "H200"]])
def test_device_properties_of_any_json_shape_name_no_gpu_and_break_nothing(properties, tmp_path):
    """A bare trace's deviceProperties is read for its GPU names only where it is a list of objects with a string
    name: anything else there names none, and diff and report run as for a trace without it."""
    pytest.importorskip("jinja2")
    from kernelscope.analyzer import load_run
    from kernelscope.analyzer.diff import diff
    from kernelscope.analyzer.report import write_report

    with load_run(_header_trace_with(tmp_path, deviceProperties=properties)) as run, load_run(RUN) as recorded:
        assert len(diff(run, run)) and len(diff(recorded, run))
        write_report(run, tmp_path / "report.html", name="trace")
    assert (tmp_path / "report.html").stat().st_size > 0


def _header_trace_with(tmp_path, **keys):
    doc = json.loads(json.dumps(EVENTS))
    doc.update(keys)
    path = tmp_path / f"header-{next(_names)}.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("name", ["manifest.json", "samples.json"])
def test_a_run_file_larger_than_its_limit_is_refused_without_reading_it_whole(name, tmp_path, monkeypatch):
    """A manifest or sample store of terabytes (a sparse file, or one that grows as it is read) is refused once the
    read passes its limit, before it takes the memory: 16 MiB for a manifest, an eighth of the machine's memory for
    samples.json (made small here)."""
    from kernelscope.analyzer import BadInputError, load_run
    from kernelscope.analyzer import samples as samples_module

    monkeypatch.setattr(samples_module, "samples_limit_bytes", lambda: 1 << 20)
    run = _copy_of_run(tmp_path, lambda run: os.truncate(run / name, 1 << 40))  # sparse: takes no disk
    limit = "16,777,216 bytes a manifest" if name == "manifest.json" else "1,048,576 bytes a sample store"
    with pytest.raises(BadInputError, match=rf"{name}: holds more than the {limit} may take here$"):
        load_run(run)  # read whole, 1 TiB would be a MemoryError


def test_a_folder_named_for_a_rank_in_other_digits_is_not_a_rank(tmp_path):
    """rank-<N> takes ASCII digits only: a folder rank-١ (ARABIC-INDIC DIGIT ONE) is no rank directory, like any
    other folder of the job, rather than rank 1."""
    from conftest import make_job
    from kernelscope.analyzer import load_run

    job = make_job(tmp_path / "job", {0: RUN})
    shutil.copytree(job / "rank-0", job / "rank-\u0661")
    with load_run(job) as run:
        assert run.ranks == [0]


def test_ranks_of_different_annotation_schemes_are_refused_unless_the_prefix_is_given(tmp_path):
    """A job's scopes are parsed with one module prefix and one function prefix: ranks whose manifests name others
    are refused (rank 1's scopes would silently name nothing), unless the prefix is given for all."""
    from conftest import make_job
    from kernelscope.analyzer import BadInputError, load_run

    job = make_job(tmp_path / "job", {0: RUN, 1: RUN})
    _edit_json("manifest.json", _set_in(["annotation", "module_prefix"], "mine:"))(job / "rank-1")
    schemes = r'\(annotation.module_prefix "ks.module:" and "mine:"\)$'
    with pytest.raises(BadInputError, match=r"job: holds ranks of different annotation schemes " + schemes):
        load_run(job)
    with load_run(job, module_prefix="ks.module:") as run:
        assert run.ranks == [0, 1]


TRAILING = [
    b'GARBAGE{["',  # a file rewritten in place by a shorter one
    b'\n"traceEvents"',  # a second trace's start
    b'  x}"\xe9',  # a byte that is not UTF-8
]


@pytest.mark.parametrize("compressed", [False, True], ids=["plain larger than 64 MiB", "gzip"])
@pytest.mark.parametrize("tail", TRAILING, ids=["garbage", "a second trace's start", "latin-1"])
def test_text_after_the_trace_object_is_trailing_data_at_its_offset_not_a_truncation(
    tail, compressed, tmp_path, monkeypatch
):
    """Text after the trace object, in a plain trace too large to parse whole for orjson's reason (the limit made 0
    here) or in what a gzip trace decompresses to, is named as trailing data at the byte where it begins: the file
    is whole, and 'truncated' would send its owner looking for a write that was cut short."""
    from kernelscope.analyzer import BadInputError, event_array, ingest, load_run

    monkeypatch.setattr(event_array, "WHOLE_CHECK_BYTES", 0)
    monkeypatch.setattr(ingest, "WHOLE_PARSE_LIMIT", 0)
    text = json.dumps(EVENTS).encode()
    path = tmp_path / ("trailing.json.gz" if compressed else "trailing.json")
    path.write_bytes(__import__("gzip").compress(text + tail) if compressed else text + tail)
    where = f"byte {len(text) + len(tail) - len(tail.lstrip())}"
    where += " of the JSON it decompresses to" if compressed else ""
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    assert str(raised.value) == f"{path}: is not valid JSON (trailing data at {where}, after the trace object)"


@pytest.mark.parametrize("compressed", [False, True], ids=["plain larger than 64 MiB", "gzip"])
@pytest.mark.parametrize("cut", [0.5, 0.9, -3])
def test_a_trace_cut_short_is_still_one_that_ends_early(cut, compressed, tmp_path, monkeypatch):
    """A ']' of an event's array near the cut closes a trace object whose next text is ',' '}' or ']' (more of the
    events): a trace cut short there is not taken for one with trailing data."""
    from kernelscope.analyzer import BadInputError, event_array, load_run

    monkeypatch.setattr(event_array, "WHOLE_CHECK_BYTES", 0)
    text = json.dumps(EVENTS).encode()
    text = text[: int(len(text) * cut) if cut > 0 else cut]
    path = tmp_path / ("cut.json.gz" if compressed else "cut.json")
    path.write_bytes(__import__("gzip").compress(text) if compressed else text)
    with pytest.raises(BadInputError, match="the JSON ends before the trace object is complete"):
        load_run(path)
