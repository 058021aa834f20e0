"""Hostile archives: markers in other encodings, damaged Parquet parts an add must not pass over, and what an add
may read and write when the archive's folders are links or the disk fills."""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import struct
import subprocess
import time
from subprocess import PIPE

import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.analyzer import Archive, BadInputError, archive_commit, archive_runs
from kernelscope.cli import main

SAMPLES = REPO / "sample_traces"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line(result) -> str:
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("kernelscope: error: ") and "Traceback" not in result.output, line
    return line


def tree(path):
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "arch"
    [(run_id, _)] = archive_runs([SAMPLES / "mlp"], path)
    return path, run_id


@pytest.fixture
def arch(base, tmp_path):
    path = tmp_path / "arch"
    shutil.copytree(base[0], path)
    return path


def bare_trace(tmp_path):
    """A run the archive does not hold: mlp's trace, decompressed (other bytes, another id)."""
    trace = tmp_path / "other.json"
    trace.write_bytes(gzip.decompress((SAMPLES / "mlp" / "trace.json.gz").read_bytes()))
    return trace


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"])
def test_a_marker_in_a_wide_encoding_is_named_as_such(encoding, arch):
    """A marker saved as UTF-16 or UTF-32 (an editor's choice on Windows) names its encoding, not a missing version."""
    (arch / "kernelscope-archive.json").write_bytes('{"kernelscope_archive": 1}'.encode(encoding))
    name = encoding[:6].upper()
    line = one_line(invoke("runs", arch))
    assert line == (
        f"kernelscope: error: {arch}: is damaged: its kernelscope-archive.json is {name} text, "
        "and kernelscope reads JSON files as UTF-8"
    )


DAMAGES = [(t, d) for t in ("runs", "events", "kernels", "samples") for d in ("cut short", "not Parquet", "missing")]


@pytest.mark.parametrize(
    ("table", "damage"), [case for case in DAMAGES if case != ("runs", "missing")]
)  # a run whose runs file is gone is not committed: an add passes over it as over a killed add's files
def test_an_add_to_an_archive_with_a_damaged_part_is_refused(table, damage, arch, tmp_path):
    """A Parquet part of a committed run cut short, overwritten or removed: an add says the archive is damaged, names
    the file, and adds nothing (it exited 0, and the archive could not be listed after)."""
    (part,) = (arch / table).rglob("*.parquet")
    if damage == "missing":
        part.unlink()
    else:
        data = part.read_bytes()
        part.write_bytes(data[: len(data) // 2] if damage == "cut short" else b"PAR1" + bytes(100) + b"PAR1")
    before = tree(arch)
    line = one_line(invoke("archive", bare_trace(tmp_path), "--to", arch))
    assert line.startswith(f"kernelscope: error: {arch}: is damaged: ") and part.name in line, line
    assert line.endswith("; nothing was added"), line
    assert tree(arch) == before


def test_an_add_of_a_run_it_holds_to_a_damaged_archive_is_refused(base, arch):
    (part,) = (arch / "runs").rglob("*.parquet")
    part.write_bytes(b"not parquet")
    line = one_line(invoke("archive", SAMPLES / "mlp", "--to", arch))
    assert "is damaged" in line and part.name in line


def test_repr_names_the_archive_and_its_runs(base, arch, tmp_path):
    assert repr(Archive(arch)) == f"Archive({str(arch)!r}, runs=1)"
    new = tmp_path / "new"
    assert repr(Archive(new, create="on add")) == f"Archive({str(new)!r}, not made yet)"
    with pytest.raises(BadInputError):
        Archive(tmp_path / "absent")


def kernelscope(*args) -> list[str]:
    return [str(REPO / ".venv" / "bin" / "kernelscope"), *map(str, args)]


def _listing(folder) -> list[str]:
    try:
        return os.listdir(folder)
    except FileNotFoundError:  # not made yet, or removed by an add that emptied it
        return []


def test_commands_adding_to_one_archive_at_once_and_one_killed_leave_it_readable(tmp_path):
    """Five `kernelscope archive` processes into one new archive at once (two of them the same run), a sixth killed
    with SIGKILL inside its add: each other one archives its run or finds it there, and a later add and `runs`
    read the archive whole, what the killed one left removed."""
    traces = []
    for name in ("demo", "threads", "maskrcnn"):
        trace = tmp_path / f"{name}.json"
        trace.write_bytes(gzip.decompress((SAMPLES / name / "trace.json.gz").read_bytes()))
        traces.append(trace)
    arch = tmp_path / "arch"
    sources = [SAMPLES / "mlp", SAMPLES / "mlp", SAMPLES / "demo", *traces[:2]]
    adds = [subprocess.Popen(kernelscope("archive", s, "--to", arch), stdout=PIPE, stderr=PIPE) for s in sources]
    doomed = subprocess.Popen(kernelscope("archive", traces[2], "--to", arch), stdout=PIPE, stderr=PIPE)
    deadline, staged = time.monotonic() + 60, []
    while not staged and time.monotonic() < deadline and doomed.poll() is None:
        staged = [name for name in _listing(arch / ".staging") if f".{doomed.pid}." in name]  # its add's token's pid
    doomed.send_signal(signal.SIGKILL)
    assert doomed.wait() == -signal.SIGKILL and staged, "killed inside its add"
    said = [add.communicate(timeout=120) for add in adds]
    assert [add.returncode for add in adds] == [0] * len(adds), said
    words = sorted(out.decode().splitlines()[0].split(": ", 1)[1] for out, _ in said)
    assert words == ["already in the archive, unchanged"] + ["archived"] * 4 or words == ["archived"] * 5, words
    later = invoke("archive", SAMPLES / "threads", "--to", arch)
    assert later.exit_code == 0, later.output
    assert not (arch / ".staging").exists() and len(Archive(arch).run_ids()) == 5
    assert sorted(str(p.relative_to(arch)).split("/")[0] for p in arch.rglob("*.parquet")).count("runs") == 5
    listed = invoke("runs", arch)
    assert listed.exit_code == 0 and listed.stdout.count("run-") == 5, listed.output


def _footer_length(data: bytes, length: int) -> bytes:
    return data[:-8] + struct.pack("<I", length) + b"PAR1"


def _large_metadata(path) -> bytes:
    """The file rewritten with 16 MiB of key-value metadata in its footer: a footer far larger than its data."""
    table = pq.read_table(path)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"x": b"y" * (16 << 20)})
    pq.write_table(table, path)
    return path.read_bytes()


def _thrift_list(count: int) -> bytes:
    """A file whose footer's schema (FileMetaData field 2, thrift compact) is a list claiming ``count`` structs."""
    varint = bytearray()
    while True:
        varint.append((count & 0x7F) | (0x80 if count >> 7 else 0))
        count >>= 7
        if not count:
            break
    meta = b"\x15\x02" + b"\x19\xfc" + bytes(varint) + bytes(64)  # version 1, then the list's header
    return b"PAR1" + meta + struct.pack("<I", len(meta)) + b"PAR1"


CRAFTED = {
    "a schema list of 2^31 - 1 structs": lambda path, data: _thrift_list((1 << 31) - 1),
    "footer length 4 GiB": lambda path, data: _footer_length(data, 0xFFFFFFF0),
    "footer length the whole file": lambda path, data: _footer_length(data, len(data) - 8),
    "footer length 0": lambda path, data: _footer_length(data, 0),
    "footer of thrift garbage": lambda path, data: b"PAR1" + bytes(range(256)) * 4 + struct.pack("<I", 1024) + b"PAR1",
    "16 MiB of footer metadata": lambda path, data: _large_metadata(path),
}


@pytest.mark.parametrize("table", ["runs", "kernels"])
@pytest.mark.parametrize("craft", CRAFTED)
def test_a_crafted_parquet_footer_is_one_line_for_every_command(craft, table, arch, tmp_path):
    """A committed part whose footer claims more than the file holds, nothing, or garbage: add, runs and sql say the
    archive is damaged in one line and write nothing; a footer of valid, large metadata reads."""
    (part,) = (arch / table).rglob("*.parquet")
    part.write_bytes(CRAFTED[craft](part, part.read_bytes()))
    before = tree(arch)
    commands = [("archive", bare_trace(tmp_path), "--to", arch), ("sql", arch, f"SELECT count(*) FROM {table}")]
    for args in commands + [("runs", arch)] * (table == "runs"):
        result = invoke(*args)
        if craft.startswith("16 MiB"):
            assert result.exit_code == 0, (args, result.output)
            continue
        line = one_line(result)
        assert line.startswith(f"kernelscope: error: {arch}"), (args, line)
        assert tree(arch) == before, args


@pytest.mark.parametrize("inside", [".staging", "events"])
def test_what_a_dead_add_left_is_not_removed_through_a_link(inside, arch, tmp_path):
    """An archive whose .staging (or a table's folder) is a link to a folder outside it that holds what looks like
    a dead add's files: the add that removes what dead adds left refuses the link, and removes nothing there."""
    run_id, token = "run-0123456789ab", f"{os.getpid()}.1.{archive_commit._this_machine()}.deadbeef"  # start 1: dead
    outside = tmp_path / "outside"
    if inside == ".staging":
        (outside / f"{run_id}.{token}").mkdir(parents=True)
        kept = outside / f"{run_id}.{token}" / "precious"
    else:
        (arch / ".staging" / f"{run_id}.{token}").mkdir(parents=True)
        shutil.copytree(arch / "events", outside)
        (outside / f"run_id={run_id}" / "rank=0").mkdir(parents=True)
        kept = outside / f"run_id={run_id}" / "rank=0" / f"part-{token}.parquet"
        shutil.rmtree(arch / "events")
    kept.write_bytes(b"outside the archive")
    (arch / inside).symlink_to(outside)
    line = one_line(invoke("archive", bare_trace(tmp_path), "--to", arch))
    assert line == (
        f"kernelscope: error: {arch / inside}: is a symbolic link inside the archive; "
        "kernelscope writes only into folders of its own"
    )
    assert kept.read_bytes() == b"outside the archive"


def test_an_archived_sample_store_larger_than_a_run_directory_s_may_be_is_refused(base, arch, monkeypatch):
    """A samples part whose rows repeat (a Parquet file of kilobytes holds 10^7 of them, gigabytes of arguments once
    read): refused as a samples.json of that size is, before its rows are read into Python."""
    from kernelscope.analyzer import samples

    run_id = base[1]
    (part,) = (arch / "samples").rglob("*.parquet")
    (runs,) = (arch / "runs").rglob("*.parquet")
    key = f"KV_METADATA {{kernelscope_part: '{run_id}/0/{part.name[5:-8]}'}}"  # the part it is of, as an add writes
    with duckdb.connect() as con:  # its own: the module's default connection may hold another test's result
        rows = f"SELECT s.* FROM read_parquet('{part}', hive_partitioning = false) s, range(1000)"
        con.execute(f"COPY ({rows}) TO '{part}.new' (FORMAT parquet, {key})")
        record = f"SELECT * REPLACE (samples * 1000 AS samples) FROM read_parquet('{runs}', hive_partitioning = false)"
        con.execute(f"COPY ({record}) TO '{runs}.new' (FORMAT parquet, {key})")  # its record says so: a consistent lie
    os.replace(f"{part}.new", part)
    os.replace(f"{runs}.new", runs)
    monkeypatch.setattr(samples, "samples_limit_bytes", lambda: 100_000)
    line = one_line(invoke("analyze", arch, "--run", run_id))
    assert line == f"kernelscope: error: {part}: holds more than the 100,000 bytes a sample store may take here", line


def test_a_runs_index_repeating_its_rows_is_not_read_into_python_whole(arch, monkeypatch):
    """A runs index whose rows repeat (kilobytes of Parquet, 200,000 rows): reading it, for a view or an add's
    check, takes no more than the committed parts' rows into Python; an index that holds a part twice is none an
    add wrote, ignored (its rows would repeat in the views), and the runs are read from their files."""
    import tracemalloc

    from kernelscope.analyzer import archive_index
    from kernelscope.analyzer.archive_commit import committed_parts
    from kernelscope.analyzer.archive_read import check_readable, read_files

    monkeypatch.setattr(archive_index, "INDEX_EVERY", 1)
    index = archive_index.refresh_index(arch, lambda parts: read_files(arch, parts, "runs"))
    query = f"SELECT i.* FROM read_parquet('{index}') i, range(200000)"
    with duckdb.connect() as con:  # its own: the module's default connection may hold another test's result
        con.execute(f"COPY ({query}) TO '{index}.new' (FORMAT parquet)")
    os.replace(f"{index}.new", index)
    committed = committed_parts(arch)
    con = duckdb.connect()
    tracemalloc.start()
    try:
        held = archive_index.read_index(con, arch, committed)
        check_readable(arch, arch)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert held.path is None and not held.schemas
    assert peak < 8 << 20, f"{peak / 2**20:.0f} MiB of Python objects"
    assert len(Archive(arch).runs()) == 1


def test_a_dead_index_writer_s_file_is_not_removed_through_a_link(arch, tmp_path, monkeypatch):
    """.index a link to a folder outside the archive holding what looks like a dead add's partial index: the add's
    index refresh removes nothing there (and writes no index through the link)."""
    from kernelscope.analyzer import archive_index

    outside = tmp_path / "outside"
    outside.mkdir()
    kept = outside / f".runs-{os.getpid()}.1.{archive_commit._this_machine()}.deadbeef.partial"  # start 1: dead
    kept.write_bytes(b"outside the archive")
    (arch / ".index").symlink_to(outside)
    monkeypatch.setattr(archive_index, "INDEX_EVERY", 1)
    run_id, added = Archive(arch).add(bare_trace(tmp_path))
    assert added and kept.read_bytes() == b"outside the archive" and os.listdir(outside) == [kept.name]
