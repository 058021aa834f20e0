"""The JSON files of a run directory or an archive as an editor saves them (a UTF-8 byte order mark, UTF-16), and
output paths a user may type (a trailing slash): each read as a trace is, or refused in one line naming the file."""

import json

import pytest
from test_bad_input import _copy_of_run
from test_hostile_input import _in_process

BOM = b"\xef\xbb\xbf"


def _encode(name, encode):
    def change(run):
        (run / name).write_bytes(encode((run / name).read_bytes()))

    return change


@pytest.mark.parametrize("name", ["manifest.json", "samples.json"])
def test_a_byte_order_mark_before_a_run_file_changes_nothing(name, tmp_path):
    """A trace may begin with an editor's UTF-8 byte order mark; a manifest or sample store saved by that editor
    was refused ('UTF-8 byte order mark (BOM) is not supported')."""
    plain = _in_process("analyze", _copy_of_run(tmp_path, lambda run: None), "--format", "csv")
    marked = _in_process("analyze", _copy_of_run(tmp_path, _encode(name, lambda data: BOM + data)), "--format", "csv")
    assert marked.exit_code == 0, marked.output
    assert marked.stdout == plain.stdout


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"])
@pytest.mark.parametrize("name", ["manifest.json", "samples.json"])
def test_a_run_file_in_utf16_or_utf32_is_named_so(name, codec, tmp_path):
    """Without a byte order mark, UTF-16 read as UTF-8 was 'an unescaped quote (") inside a string'; UTF-32 with
    one was named UTF-16 (its little-endian mark begins with UTF-16's), without one a fault of the JSON."""
    run = _copy_of_run(tmp_path, _encode(name, lambda data: data.decode("utf-8").encode(codec)))
    done = _in_process("analyze", run)
    assert done.exit_code == 2 and isinstance(done.exception, SystemExit), done.exception
    (line,) = done.stderr.strip().splitlines()
    problem = f"is not valid JSON (it is {codec[:6].upper()} text, and kernelscope reads JSON files as UTF-8)"
    assert line == f"kernelscope: error: {run}/{name}: {problem}"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["analyze", "{run}", "-o", "out.csv/"], "'out.csv/' ends with '/', which names a directory, not a file"),
        (["report", "{run}", "-o", "out.html/"], "'out.html/' ends with '/', which names a directory, not a file"),
        (["analyze", ""], "Invalid value for 'RUN': '' is empty, not a path"),
        (["archive", "{run}", "--to", ""], "Invalid value for '--to': '' is empty, not a path"),
    ],
)
def test_a_path_pathlib_would_read_as_another_is_refused(args, problem, tmp_path, monkeypatch):
    """pathlib reads 'out.csv/' as out.csv, and '' as the current folder: -o out.csv/ wrote the file out.csv, and
    --scripts '' wrote its scripts into the current folder. Each is a usage error now, and nothing is written."""
    run = _copy_of_run(tmp_path, lambda run: None)
    monkeypatch.chdir(tmp_path)
    done = _in_process(*(arg.format(run=run) for arg in args))
    assert done.exit_code == 2 and isinstance(done.exception, SystemExit), done.exception
    (line,) = done.stderr.strip().splitlines()
    assert problem in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == [run.name]


def _first_arguments(value):
    def change(run):
        doc = json.loads((run / "samples.json").read_text())
        doc["functions"]["linear"][0]["args"] = {"tuple": [value]}
        (run / "samples.json").write_text(json.dumps(doc))

    return change


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"int": "9" * 5000}, "a value tagged 'int' holds \"" + "9" * 38 + "…, not a number of"),
        (
            {"float": "x" * 100_000},
            "a value tagged 'float' holds \"" + "x" * 38 + "…, not a number)",
        ),
    ],
    ids=["an int of 5000 digits", "a float of 100,000 letters"],
)
def test_a_number_of_a_sample_that_python_cannot_read_is_named_briefly(value, problem, tmp_path):
    """int() of more than 4300 digits advised 'use sys.set_int_max_str_digits()', and float() of text quoted all of
    it: a line of 100 KB."""
    run = _copy_of_run(tmp_path, _first_arguments(value))
    done = _in_process("analyze", run)
    assert done.exit_code == 2 and isinstance(done.exception, SystemExit), done.exception
    (line,) = done.stderr.strip().splitlines()
    assert f"samples.json: has a malformed sample 0 of function 'linear' ({problem}" in line and len(line) < 400, line


def test_a_sample_store_of_a_format_version_below_1_is_refused(tmp_path):
    def change(run):
        doc = json.loads((run / "samples.json").read_text())
        doc["format_version"] = -1
        (run / "samples.json").write_text(json.dumps(doc))

    run = _copy_of_run(tmp_path, change)
    done = _in_process("analyze", run)
    assert done.exit_code == 2, done.output
    assert (
        done.stderr.strip()
        == f"kernelscope: error: {run}/samples.json: has format version -1, which no kernelscope writes"
    )


def test_bench_scripts_into_a_link_to_nothing_is_refused_before_any_replay(layouts_run, tmp_path):
    """--scripts naming a symbolic link to nothing failed after the replays as '<link>: File exists' (mkdir's
    errno), where a file there is 'is not a directory to write the benchmark scripts into'."""
    pytest.importorskip("torch")
    from kernelscope.analyzer import KernelscopeError, load_run
    from kernelscope.recorder.bench import bench

    link = tmp_path / "scripts"
    link.symlink_to(tmp_path / "nowhere")
    with load_run(layouts_run[1]) as run, pytest.raises(KernelscopeError) as caught:
        bench(run, ["gelu"], scripts=link, device="cpu", repeat=1, warmup=0)
    assert str(caught.value) == f"{link}: is not a directory to write the benchmark scripts into"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scripts"]
