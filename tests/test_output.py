"""The shared output switches: every format, the extension rule, atomic writes, no overwrite without --force."""

import errno
import json
import os
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.analyzer import load_run
from kernelscope.cli import main

RUN = REPO / "sample_traces" / "mlp"
QUERY = "SELECT kernel, kernel_us, function_name FROM kernels ORDER BY event_id"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def expected():
    from kernelscope.analyzer import load_run

    with load_run(RUN) as run:
        return run.sql(QUERY)


@pytest.mark.parametrize("name", ["k.csv", "k.json", "k.jsonl", "k.ndjson", "k.parquet"])
def test_the_extension_picks_the_format_and_every_format_round_trips(name, tmp_path, expected):
    target = tmp_path / name
    result = invoke("sql", RUN, QUERY, "-o", target)
    assert result.exit_code == 0, result.output
    assert result.output == "" and [p.name for p in tmp_path.iterdir()] == [name], "no temporary file left"
    if name.endswith(".csv"):
        back = pd.read_csv(target)
    elif name.endswith(".json"):
        back = pd.DataFrame(json.loads(target.read_text()))  # one document: json.load reads it
    elif name.endswith(("l", ".ndjson")):
        back = pd.DataFrame([json.loads(line) for line in target.read_text().splitlines()])
    else:
        back = duckdb.connect().execute(f"SELECT * FROM read_parquet('{target}')").df()
    assert list(back.columns) == list(expected.columns) and len(back) == len(expected)
    assert back["kernel_us"].tolist() == pytest.approx(expected["kernel_us"].tolist())
    assert back["kernel"].tolist() == expected["kernel"].tolist()


@pytest.mark.parametrize("command", [["analyze", "--kernels"], ["diff", REPO / "sample_traces" / "demo"]])
def test_a_table_written_to_a_file_holds_every_row(command, tmp_path):
    """`-o rows.txt` wrote the terminal's 10 rows, and nothing in the file said that it was cut."""
    args = [command[0], REPO / "sample_traces" / "demo", *command[1:]]
    every = len(invoke(*args, "--csv").output.splitlines())  # the header and every row
    assert every > 11 and invoke(*args, "-o", tmp_path / "rows.txt").exit_code == 0
    assert len((tmp_path / "rows.txt").read_text().splitlines()) == every
    cut = len(invoke(*args, "--csv", "--top-k", "3").output.splitlines())
    assert invoke(*args, "--top-k", "3", "-o", tmp_path / "three.txt").exit_code == 0
    assert len((tmp_path / "three.txt").read_text().splitlines()) == cut < every  # --top-k still cuts a file


def test_format_flag_wins_over_the_extension(tmp_path):
    target = tmp_path / "summary.txt"
    assert invoke("analyze", RUN, "--format", "csv", "-o", target).exit_code == 0
    assert target.read_text().startswith("function_name,calls,")


@pytest.mark.parametrize(
    "command, fmt, name, named",
    [
        (["analyze", RUN], "parquet", "rows.csv", "csv"),
        (["analyze", RUN], "csv", "rows.parquet", "parquet"),
        (["analyze", RUN, "--kernels"], "jsonl", "rows.json", "json"),
        (["sql", RUN, "SELECT 1 AS x"], "csv", "db.duckdb", "duckdb"),
    ],
)
def test_a_format_the_extension_contradicts_is_refused_before_any_work(tmp_path, command, fmt, name, named):
    """--format csv -o rows.parquet wrote CSV text into a .parquet file, which every Parquet reader then refused."""
    target = tmp_path / name
    result = invoke(*command, "--format", fmt, "-o", target)
    assert result.exit_code == 2 and not target.exists()
    assert result.stderr.strip() == (
        f"kernelscope: error: {target}: names a {named} file, and --format asks for {fmt}; rename it, or leave"
        " --format out"
    )
    assert invoke(*command, "--format", "jsonl", "-o", tmp_path / "rows.ndjson").exit_code == 0, "an alias agrees"


def test_an_existing_output_is_refused_without_force_and_replaced_with_it(tmp_path):
    target = tmp_path / "summary.csv"
    target.write_text("precious\n")
    refused = invoke("analyze", RUN, "-o", target)
    assert refused.exit_code == 2 and "already exists" in refused.output and "--force" in refused.output
    assert target.read_text() == "precious\n"
    assert invoke("analyze", RUN, "-o", target, "--force").exit_code == 0
    assert target.read_text().startswith("function_name,")


def test_json_numbers_are_csvs_and_times_are_iso_text(tmp_path):
    """pandas' JSON writer printed 1693.11 as 1693.1099999999999 and a sum as 2130.666000000001986, where CSV says
    1693.11 and 2130.666; a run's start time was milliseconds since the epoch, where CSV and tables show the date."""
    import csv
    import io

    from kernelscope.analyzer import archive_runs

    query = "SELECT 1693.11::DOUBLE AS a, 0.1 + 0.2 AS b, 4.0::DOUBLE AS calls, 1e300 * 1e300 AS c, 'x' AS t"
    rows = json.loads(invoke("sql", RUN, query, "--format", "json").output)
    assert rows == [{"a": 1693.11, "b": 0.3, "calls": 4, "c": None, "t": "x"}]
    assert '"a":1693.11,' in invoke("sql", RUN, query, "--format", "jsonl").output
    text = invoke("sql", RUN, "SELECT * FROM summary", "--format", "json").output
    from_csv = list(csv.DictReader(io.StringIO(invoke("sql", RUN, "SELECT * FROM summary", "--format", "csv").output)))
    for row, line in zip(json.loads(text), from_csv, strict=True):
        assert {k: "" if v is None else str(v) for k, v in row.items()} == line, "the numbers CSV writes"
    archive = tmp_path / "archive"
    archive_runs([RUN], archive)
    (listed,) = json.loads(invoke("runs", archive, "--format", "json").output)
    assert listed["start_time"] == json.loads((RUN / "manifest.json").read_text())["start_time"]


def test_parquet_needs_a_file():
    result = invoke("sql", RUN, QUERY, "--format", "parquet")
    assert result.exit_code == 2 and "needs -o FILE" in result.output


def test_csv_and_json_to_stdout(expected):
    csv = invoke("sql", RUN, QUERY, "--format", "csv")
    assert csv.exit_code == 0 and len(csv.output.strip().splitlines()) == len(expected) + 1
    document = json.loads(invoke("sql", RUN, QUERY, "--format", "json").output)
    assert [row["kernel"] for row in document] == expected["kernel"].tolist()
    lines = invoke("sql", RUN, QUERY, "--format", "jsonl").output.strip().splitlines()
    assert [json.loads(line)["kernel"] for line in lines] == expected["kernel"].tolist()


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("archive") / "archive"
    assert invoke("archive", RUN, "--to", path).exit_code == 0
    return path


@pytest.mark.parametrize("command", [("sql", RUN, QUERY), ("analyze", RUN), ("diff", RUN, RUN), ("runs",)])
@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "table"])
def test_the_short_forms_of_format_write_what_format_writes(command, fmt, archive):
    """sqlite-utils' --csv, --json, --table, which a newcomer types first: each is --format's, on every command."""
    command = command if command != ("runs",) else ("runs", archive)
    short, named = invoke(*command, f"--{fmt}"), invoke(*command, "--format", fmt)
    assert short.exit_code == named.exit_code == 0, short.output
    assert short.output == named.output


def test_two_formats_named_at_once_are_one_usage_error(tmp_path):
    for args in (["--csv", "--json"], ["--format", "json", "--csv"]):
        result = invoke("analyze", RUN, *args, "-o", tmp_path / "rows.csv")
        assert result.exit_code == 2 and "name different formats: give one" in result.stderr, args
    assert not (tmp_path / "rows.csv").exists()
    assert invoke("analyze", RUN, "--csv", "--format", "csv").exit_code == 0, "the same format twice is no conflict"


def _special(kind, path, tmp_path):
    """A FIFO, a symbolic link or a character device (made like /dev/null: root only) at ``path``."""
    import os
    import stat

    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        (tmp_path / "target.csv").write_text("the link's target\n")
        path.symlink_to(tmp_path / "target.csv")
    else:
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs root (CI runs as root)")
    return path


KINDS = {"fifo": "a FIFO", "symlink": "a symbolic link", "device": "a character device"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", [["analyze", RUN], ["sql", RUN, "SELECT 1 AS x"]], ids=["analyze", "sql"])
def test_force_never_replaces_anything_but_a_regular_file(kind, command, tmp_path):
    import os
    import stat

    target = _special(kind, tmp_path / "out.csv", tmp_path)
    before = os.lstat(target)
    result = invoke(*command, "-o", target, "--force")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        f"kernelscope: error: {target}: is {KINDS[kind]}, not a regular file; kernelscope replaces only regular files"
    )
    after = os.lstat(target)
    assert (after.st_ino, stat.S_IFMT(after.st_mode)) == (before.st_ino, stat.S_IFMT(before.st_mode))
    if kind == "symlink":
        assert (tmp_path / "target.csv").read_text() == "the link's target\n"


def test_the_check_is_made_again_just_before_the_rename(tmp_path):
    """A FIFO put in place while the command works is not replaced either."""
    import os

    from kernelscope.analyzer import atomic
    from kernelscope.analyzer.errors import KernelscopeError

    target = tmp_path / "late.csv"

    def write_while_a_fifo_appears(tmp):
        with open(tmp, "w") as out:
            out.write("x\n")
        os.mkfifo(target)

    with pytest.raises(KernelscopeError, match="is a FIFO, not a regular file"):
        atomic.replace_atomically(target, write_while_a_fifo_appears)
    assert target.is_fifo() and [p.name for p in tmp_path.iterdir()] == ["late.csv"], "no temporary file left"


@pytest.mark.parametrize("name", ["k.csv", "k.json", "k.parquet", "k.duckdb"])
def test_outputs_are_made_with_the_umask(name, tmp_path):
    import os

    old = os.umask(0o027)
    try:
        assert invoke("sql", RUN, QUERY, "-o", tmp_path / name).exit_code == 0
    finally:
        os.umask(old)
    assert (tmp_path / name).stat().st_mode & 0o777 == 0o640, "0666 less the umask, not tempfile's 0600"


def test_a_file_is_flushed_before_the_rename_that_publishes_it(tmp_path, monkeypatch):
    import os

    from kernelscope.analyzer import atomic

    events = []
    fsync, replace = os.fsync, os.replace
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: events.append(("fsync", os.fstat(fd).st_ino)) or fsync(fd))
    monkeypatch.setattr(
        atomic.os, "replace", lambda src, dst: events.append(("rename", os.stat(src).st_ino)) or replace(src, dst)
    )
    atomic.write_bytes_atomically(tmp_path / "f.json", b"{}")
    written = os.stat(tmp_path / "f.json").st_ino
    assert events.index(("fsync", written)) < events.index(("rename", written))
    assert events[-1] == ("fsync", os.stat(tmp_path).st_ino), "the folder is flushed after the rename"


def test_names_from_a_trace_print_as_plain_escaped_text_in_tables(tmp_path):
    """A kernel named with a terminal escape, a line break and rich markup: the table shows the name escaped and
    literally (rich would have failed on the unmatched closing tag, and the terminal taken the escape)."""
    import gzip

    doc = json.loads(gzip.decompress((RUN / "trace.json.gz").read_bytes()))
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    kernel["name"] = "evil\x1b]0;owned\x07[/x][bold]k\nline"
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(doc))
    result = invoke("sql", trace, "SELECT kernel FROM kernels WHERE kernel LIKE 'evil%'")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
    cells = "".join(line.strip("│ ") for line in result.output.splitlines()[3:-1])
    assert cells == "evil\\x1b]0;owned\\x07[/x][bold]k\\nline"


EVIL = "m\x1b]0;owned\x07\x1b[31m[red]x[/red]\r\nkernelscope: error: forged\u202e"
EVIL_SHOWN = "m\\x1b]0;owned\\x07\\x1b[31m[red]x[/red]\\r\\nkernelscope: error: forged\\u202e"


def _renamed(tmp_path, rename) -> Path:
    """A copy of RUN whose trace has the names ``rename`` gives (name -> new name, or None to keep it)."""
    import gzip
    import shutil

    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    doc = json.loads(gzip.decompress((run / "trace.json.gz").read_bytes()))
    for event in doc["traceEvents"]:
        event["name"] = rename(event) or event.get("name")
    (run / "trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    return run


def test_names_from_a_trace_print_as_plain_escaped_text_in_the_tree(tmp_path):
    """A module named with terminal escapes, a line break and rich markup: one line of the tree, shown literally."""
    run = _renamed(tmp_path, lambda e: "ks.module:0" + EVIL if e.get("name") == "ks.module:0" else None)
    result = invoke("tree", run)
    assert result.exit_code == 0, result.output
    assert not {"\x1b", "\x07", "\r", "\u202e"} & set(result.output)
    (line,) = [line for line in result.output.splitlines() if "owned" in line]
    assert line.endswith("0" + EVIL_SHOWN)


def test_names_in_notes_and_warnings_print_as_plain_escaped_text(tmp_path):
    """A line on stderr quoting a trace (a note naming a category of device events, here) is one line whatever the
    names hold: no forged second line, no escape taken by the terminal."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 5},
        {"ph": "X", "cat": EVIL, "name": "x", "pid": 2, "tid": 3, "ts": 2, "dur": 1},
    ]
    trace = tmp_path / "note.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    result = invoke("analyze", trace)
    assert result.exit_code == 0, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("kernelscope: note: ") and EVIL_SHOWN in line


def test_only_the_one_function_of_stderr_lines_writes_to_stderr():
    """Every error, warning and note of the CLI goes through output.diagnostic, which escapes what it quotes; the
    others write fixed text (the entry point's line for a signal during the imports, a bare command's help)."""
    import re

    sources = {path.name: path.read_text() for path in (REPO / "cli").glob("*.py")}
    writes = {name: len(re.findall(r"err=|sys\.stderr", text)) for name, text in sources.items()}
    assert {name: n for name, n in writes.items() if n} == {"output.py": 1, "entry.py": 1, "group.py": 1}


def test_csv_to_stdout_is_the_names_exactly_when_piped(tmp_path):
    """CSV on a pipe holds the names byte for byte, as the file does (click's echo strips ANSI sequences where
    stdout is not a terminal); on a terminal their control characters are escaped, as in a table."""
    run = _renamed(tmp_path, lambda e: EVIL + e["name"] if e.get("cat") == "kernel" else None)
    piped = invoke("analyze", run, "--kernels", "--format", "csv")
    assert piped.exit_code == 0, piped.output
    assert invoke("analyze", run, "--kernels", "-o", tmp_path / "k.csv").exit_code == 0
    assert piped.stdout_bytes == (tmp_path / "k.csv").read_bytes() and EVIL.encode() in piped.stdout_bytes
    from kernelscope import output

    shown = output.render(output.escaped(pd.DataFrame({"kernel": [EVIL], "n": [1]})), "csv")
    assert shown == f"kernel,n\n{EVIL_SHOWN},1\n"


@pytest.mark.parametrize("command", ["analyze", "report"])
def test_an_output_another_command_writes_meanwhile_is_not_replaced_without_force(command, tmp_path, monkeypatch):
    """Two commands writing one -o at once: the check before the work passes for both, and the one that finishes
    second must not rename its file over the first's (its hard link fails where the name exists)."""
    import kernelscope.analyzer.report as report
    from kernelscope import output

    target = tmp_path / ("k.csv" if command == "analyze" else "r.html")
    module, name = (output, "render") if command == "analyze" else (report, "render_report")
    real = getattr(module, name)

    def meanwhile(*args, **kwargs):
        target.write_text("the other command's")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, meanwhile)
    result = invoke(command, RUN, *(["--kernels"] if command == "analyze" else []), "-o", target)
    assert result.exit_code == 2, result.output
    assert (
        result.stderr
        == f"kernelscope: error: {target}: already exists; choose another name, or replace it with --force\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == [target.name] and target.read_text() == "the other command's"


def test_a_file_written_meanwhile_is_replaced_only_with_overwrite(tmp_path):
    """replace_atomically, which every output goes through (the DuckDB database and Parquet files too)."""
    from kernelscope.analyzer.atomic import replace_atomically
    from kernelscope.analyzer.errors import OutputExistsError

    target = tmp_path / "db.duckdb"

    def write(tmp):
        Path(tmp).write_text("ours")
        target.write_text("theirs")

    with pytest.raises(OutputExistsError):
        replace_atomically(target, write, overwrite=False)
    assert [p.name for p in tmp_path.iterdir()] == [target.name] and target.read_text() == "theirs"
    replace_atomically(target, write, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == [target.name] and target.read_text() == "ours"


def test_integers_past_what_a_float_holds_print_exactly_in_tables():
    """Nanosecond timestamps since the epoch (external traces) are past 2**53: printed through a float they came
    out rounded, with decimals."""
    query = "SELECT 1733000000123456789::BIGINT AS ts_ns, NULL::BIGINT AS gap, 7::BIGINT AS dur_us, 2.5 AS ratio"
    result = invoke("sql", RUN, query)
    assert result.exit_code == 0, result.output
    cells = [cell.strip() for cell in result.output.splitlines()[3].strip("│").split("│")]
    assert cells == ["1,733,000,000,123,456,789", "-", "7.000", "2.500"]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc, where no file can be created")
@pytest.mark.parametrize(
    "command",
    [
        ["analyze", RUN, "-o", "{out}.csv"],
        ["analyze", RUN, "-o", "{out}.parquet"],
        ["sql", RUN, QUERY, "-o", "{out}.json"],
        ["sql", RUN, "-o", "{out}.duckdb"],
        ["diff", RUN, RUN, "-o", "{out}.csv"],
        ["report", RUN, "-o", "{out}.html"],
    ],
    ids=["analyze csv", "analyze parquet", "sql json", "sql duckdb", "diff", "report"],
)
def test_a_destination_that_cannot_be_written_is_named_as_given(command, tmp_path):
    """An output is written through a temporary sibling; when that cannot be made, the one line names the path the
    user gave, never the sibling's random name."""
    args = [str(word).format(out="/proc/self/ks-out") for word in command]
    result = invoke(*args)
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert result.stderr == f"kernelscope: error: {args[-1]}: No such file or directory\n"


def test_a_failure_while_writing_names_the_destination(tmp_path, monkeypatch):
    """A write that fails (a full disk) on the temporary sibling, or with no file named, is reported for the
    destination; the exception is the one raised, and an error naming another file keeps its name."""
    from kernelscope.analyzer import atomic

    target = tmp_path / "out.csv"
    named = {"the sibling": lambda tmp: (tmp,), "no file": lambda tmp: (), "another file": lambda tmp: ("/elsewhere",)}
    for case, expected in (("the sibling", str(target)), ("no file", str(target)), ("another file", "/elsewhere")):
        error = []

        def write(tmp, case=case, error=error):
            error.append(OSError(errno.ENOSPC, "No space left on device", *named[case](tmp)))
            raise error[0]

        with pytest.raises(OSError) as caught:
            atomic.replace_atomically(target, write)
        assert caught.value is error[0] and caught.value.filename == expected, case
        assert list(tmp_path.iterdir()) == [], "no temporary file left"


FILE_SIZE_LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as one on a full disk fails
resource.setrlimit(resource.RLIMIT_FSIZE, (4000, 4000))
from kernelscope.cli import main
for command in sys.argv[1:]:
    try:
        main(command.split("|"))
    except SystemExit as exc:
        print(exc.code)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="needs RLIMIT_FSIZE and SIGXFSZ")
def test_a_write_by_duckdb_that_fails_names_the_destination(tmp_path):
    """DuckDB's own message of a failed write (a full disk; here a file size limit) names its temporary file and
    ended in a traceback: it is one line naming the destination, with the system's reason, and nothing is left."""
    import subprocess

    commands = {
        "k.duckdb": ["sql", RUN, "-o", "k.duckdb"],
        "k.parquet": ["analyze", RUN, "--kernels", "-o", "k.parquet"],
        "arch": ["archive", RUN, "--to", "arch"],
    }
    words = ["|".join(map(str, command)) for command in commands.values()]
    done = subprocess.run(
        [sys.executable, "-c", FILE_SIZE_LIMITED, *words], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.stdout.split() == ["2"] * len(commands), done.stderr
    assert done.stderr.splitlines() == [f"kernelscope: error: {name}: File too large" for name in commands]
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert left == [], "nothing: the archive the failed add made went with it"


@pytest.mark.parametrize(
    "command",
    [["analyze", "{run}"], ["sql", "{run}", "SELECT 1 AS x"], ["diff", "{run}", RUN], ["report", "{run}"]],
    ids=["analyze", "sql", "diff", "report"],
)
@pytest.mark.parametrize("name", ["trace.json.gz", "manifest.json", "summary.csv"])
def test_force_replaces_no_file_of_the_input(command, name, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    (run / "summary.csv").write_text("kept\n")
    before = {path.name: path.read_bytes() for path in run.iterdir()}
    target = run / name
    formats = [] if command[0] == "report" else ["--format", "csv"]
    result = invoke(
        *[part.format(run=run) if isinstance(part, str) else part for part in command],
        *formats,
        "-o",
        target,
        "--force",
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        f"kernelscope: error: {target}: is inside {run}, which this command reads: --force replaces no file there; "
        "write it elsewhere"
    )
    assert {path.name: path.read_bytes() for path in run.iterdir()} == before, "the run as it was, nothing added"


def test_force_replaces_no_trace_read_and_a_new_file_beside_the_input_is_written(tmp_path):
    trace = tmp_path / "trace.json.gz"
    trace.write_bytes((RUN / "trace.json.gz").read_bytes())
    result = invoke("analyze", trace, "--format", "csv", "-o", trace, "--force")
    assert result.exit_code == 2
    assert (
        result.stderr.strip()
        == f"kernelscope: error: {trace}: is {trace}, which this command reads; write the output elsewhere"
    )
    assert trace.read_bytes() == (RUN / "trace.json.gz").read_bytes()
    assert invoke("analyze", RUN, "-o", tmp_path / "summary.csv", "--force").exit_code == 0


def test_a_piped_table_is_as_wide_as_columns_says_and_never_cuts_a_number():
    demo = str(REPO / "sample_traces" / "demo")
    fits = CliRunner().invoke(main, ["analyze", demo, "--by", "kernel", "--top-k", "3"], env={"COLUMNS": "60"})
    assert fits.exit_code == 0, fits.output
    table = [line for line in fits.output.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(map(len, table)) == 60, "the table fills the 60 columns COLUMNS gives, not 200"
    narrow = CliRunner().invoke(main, ["analyze", demo, "--top-k", "3"], env={"COLUMNS": "60"})
    assert narrow.exit_code == 0, narrow.output
    with load_run(demo) as run:
        summary = run.describe(3)
    for value in summary["time_spent_us"]:
        assert f" {value:,.3f} │" in narrow.output, f"{value:.3f} whole on one line of a 60-column table"
    assert "│ linear " in narrow.output and "─┘" in narrow.output, "the last column is printed, not cropped"


@pytest.mark.parametrize("columns, width, shown", [("80", 80, 7), ("60", 60, 5), ("120", 112, 7)])
def test_a_narrow_terminal_breaks_headers_after_an_underscore_never_inside_a_word(columns, width, shown):
    """The summary's headers (num_distinct_samples, 20 characters over 2-digit counts) fold after an underscore,
    the ones that save most first, so the table fits 80 columns (60 it cannot: its last two columns are left out,
    tests/test_narrow_tables.py); none breaks inside a word (function_nam / e)."""
    demo = str(REPO / "sample_traces" / "demo")
    result = CliRunner().invoke(main, ["analyze", demo, "--top-k", "3"], env={"COLUMNS": columns})
    assert result.exit_code == 0, result.output
    table = [line for line in result.output.splitlines() if line[:1] in "┏┃┡│└"]
    assert max(map(len, table)) <= width
    cells = [[cell.strip() for cell in line.strip("┃").split("┃")] for line in table if line.startswith("┃")]
    headers = ["".join(parts) for parts in zip(*cells, strict=True)]
    with load_run(demo) as run:
        assert headers == list(run.describe(3).columns)[:shown]
    for parts in zip(*cells, strict=True):
        pieces = [piece for piece in parts if piece]
        assert all(piece.endswith("_") for piece in pieces[:-1]), f"{pieces} breaks inside a word"
    assert (len(cells) == 1) == (columns == "120"), "one line where it fits"


@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
@pytest.mark.parametrize(
    "args", [["analyze", "--by", "kernel"], ["tree", "--show-calls"]], ids=["analyze-by-kernel", "tree-show-calls"]
)
def test_a_table_on_a_stdout_that_is_not_utf8_shows_what_it_cannot_encode_as_a_question_mark(args, encoding):
    """A Latin-1 or ASCII locale's stdout has no `…` (a cut kernel name) or, in ASCII, `µ`: rich raised
    UnicodeEncodeError with a traceback; now the table prints, those characters as `?`."""
    import subprocess

    demo = REPO / "sample_traces" / "demo"
    environment = {**os.environ, "PYTHONIOENCODING": encoding}
    command = [sys.executable, "-m", "kernelscope", args[0], str(demo), *args[1:]]
    done = subprocess.run(command, capture_output=True, env=environment, timeout=120)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    assert b"?" in done.stdout  # click writes its own lines (the footer) to an ASCII stream as UTF-8, on purpose
    assert encoding == "ascii" or done.stdout.decode(encoding)  # in Latin-1, every byte in the stream's encoding


def test_a_missing_time_shows_as_a_dash_as_every_missing_value_does(capsys):
    """`kernelscope runs` of an archive holding a bare trace (no manifest, so no start_time) showed `NaT`."""
    from kernelscope.output import print_table

    print_table(pd.DataFrame({"name": ["a", "b"], "start_time": pd.to_datetime(["2026-12-06 01:17:22", None])}))
    shown = capsys.readouterr().out
    assert "NaT" not in shown and "│ b    │ -  " in shown


def test_a_write_into_a_missing_folder_names_the_path_alone(tmp_path):
    """The API's write (write_report into a folder that does not exist) said "…: 'nodir/x.html' -> None": the
    temporary file's name was replaced by the path, and its second name by None, which str() prints."""
    from kernelscope.analyzer.atomic import replace_atomically

    path = tmp_path / "nodir" / "x.html"
    with pytest.raises(FileNotFoundError) as raised:
        replace_atomically(path, lambda tmp: None)
    assert str(raised.value) == f"[Errno 2] No such file or directory: '{path}'"
    assert raised.value.filename == str(path) and raised.value.filename2 is None


def test_a_long_table_is_drawn_as_rich_draws_it_without_waiting_on_rich(capsys, monkeypatch):
    """`analyze --kernels --top-k 0` of 85,000 rows spent two minutes in rich's layout before its first line reached
    `| head`: from 1,000 rows the table is drawn by cli/long_table.py, the same lines where no column folds."""
    from kernelscope import long_table
    from kernelscope.output import print_table

    monkeypatch.setenv("COLUMNS", "400")  # piped: wide enough that rich folds nothing either
    frame = pd.DataFrame(
        {
            "module_name": [f"layer.{i % 7}" + "é" * (i % 3) for i in range(1200)],
            "kernel_us": [i * 1.5 for i in range(1200)],
            "calls": list(range(1200)),
            "kernel": ["k\x1b[31m" if i == 5 else f"kernel_{i}" for i in range(1200)],  # escaped, as rich's cells
        }
    )
    print_table(frame, "t: kernels")
    drawn = capsys.readouterr().out
    monkeypatch.setattr(long_table, "LONG_TABLE", 10**9)
    print_table(frame, "t: kernels")
    assert drawn == capsys.readouterr().out
    assert len(drawn.splitlines()) == 1 + 3 + 1200 + 1 and "k\\x1b[31m" in drawn


def test_a_table_written_to_a_file_shows_its_numbers_as_the_terminal_does(tmp_path):
    """`-o rows.txt` wrote pandas' text of the frame: calls as 14.0, shares as 29.696023, sizes as 0.000076, where
    the terminal's table shows 14, 29.696 and 0.000; the file now has the table's number formats, a row per line,
    names left-aligned and numbers right-aligned."""
    target = tmp_path / "rows.txt"
    assert invoke("analyze", REPO / "sample_traces" / "demo", "-o", target).exit_code == 0
    lines = target.read_text().splitlines()
    assert lines[0].split() == ["function_name", "calls", "num_distinct_samples", "num_modules", "time_spent_us",
                                "time_spent_pct", "tensor_size_MB"]  # fmt: skip
    assert lines[1].split() == ["linear", "14", "13", "6", "31.359", "29.696", "0.372"]
    assert lines[1].startswith("linear ") and lines[1].endswith(" 0.372")
    assert len({len(line) for line in lines}) == 1, "aligned columns"
