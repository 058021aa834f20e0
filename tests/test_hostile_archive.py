"""Hostile archives: markers in other encodings, damaged Parquet parts an add must not pass over, and what an add
may read and write when the archive's folders are links or the disk fills."""

from __future__ import annotations

import gzip
import shutil

import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.analyzer import Archive, BadInputError, archive_runs
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
