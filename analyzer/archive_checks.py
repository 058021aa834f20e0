"""What an archive's files must hold to be read back as runs: each rank's manifest and samples checked as a run
directory's, and the columns of its events and kernels those of a run of this kernelscope. archive.py raises what
these find as bad input of the archive."""

from __future__ import annotations

import os
import re
import tempfile
from functools import cache
from pathlib import Path

import duckdb
import orjson

from .atomic import refuse_unless_utf8
from .errors import BadInputError, KernelscopeError
from .json_text import BOM, wide_encoding
from .ranks import ARCHIVE_MARKER
from .run import Run
from .rundir import check_manifest
from .samples import decode


def archived_manifest(path: Path, text: str | None) -> dict | None:
    """A rank's manifest as the archive holds it (JSON text; null for a bare trace), checked as a run directory's."""
    try:
        manifest = None if text is None else orjson.loads(text)
    except orjson.JSONDecodeError:
        raise BadInputError(path, "has a manifest that is not valid JSON") from None
    if manifest is not None:
        check_manifest(path, manifest)
    return manifest


def archived_sample(path: Path, name: str, calls: object, args: str | None, kwargs: str | None) -> tuple[tuple, dict]:
    """One archived sample's (args, kwargs), decoded and checked as samples.json's are."""
    try:
        if not isinstance(name, str) or type(calls) is not int or calls < 1:
            raise ValueError("its function_name is not a string or its call count not a positive integer")
        sample = decode(orjson.loads(args)), decode(orjson.loads(kwargs))
        if not (isinstance(sample[0], tuple) and isinstance(sample[1], dict)):
            raise ValueError("args must be a tuple and kwargs a dict")
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:  # JSONDecodeError: a ValueError
        detail = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc) or type(exc).__name__
        raise BadInputError(path, f"has a malformed sample of function {name!r} ({detail})") from None
    return sample


MARKER_BYTES = 4096  # the marker the archive writes holds a few bytes: more is not one


def check_creatable(archive: Path, root: Path) -> None:
    """Fail unless the folder ``archive`` (``root``, absolute) can become an archive: its parent is a folder, it is
    missing, empty or one, and its path is UTF-8, the only paths DuckDB takes (it reads and writes every file)."""
    refuse_unless_utf8(root, "an archive", shown=archive)
    if not root.parent.is_dir():
        raise KernelscopeError(archive.parent, "is not an existing directory to create the archive in")
    if os.path.lexists(root) and not root.is_dir():
        raise KernelscopeError(archive, f"exists and is not a kernelscope archive (no {ARCHIVE_MARKER})")
    if root.is_dir() and any(not name.startswith(f".{ARCHIVE_MARKER}.") for name in os.listdir(root)):
        if not (root / ARCHIVE_MARKER).is_file():
            raise KernelscopeError(archive, f"exists and is not a kernelscope archive (no {ARCHIVE_MARKER})")


def check_format(archive: Path, marker: Path, newest: int) -> None:
    """The archive's marker records a format version (``kernelscope_archive``, an integer >= 1) this kernelscope
    reads (up to ``newest``): an archive of a newer format is refused rather than misread, one without a version
    is damaged."""
    try:
        with open(marker, "rb") as stream:
            text = stream.read(MARKER_BYTES + 1)
    except OSError as exc:  # permission denied, or an input/output error
        raise BadInputError(marker, f"cannot be read ({exc.strerror or exc})") from None
    try:
        held = orjson.loads(text.removeprefix(BOM)) if len(text) <= MARKER_BYTES else None
    except orjson.JSONDecodeError:
        held = None
    version = held.get("kernelscope_archive") if isinstance(held, dict) else None
    encoding = wide_encoding(text) if held is None else None
    if encoding is not None:  # an editor's UTF-16 save: the version may be there, in bytes not read as JSON
        raise BadInputError(
            archive, f"is damaged: its {marker.name} is {encoding} text, and kernelscope reads JSON files as UTF-8"
        )
    if type(version) is not int or version < 1:
        problem = f"its {marker.name} records no format version (an integer kernelscope_archive)"
        raise BadInputError(archive, f"is damaged: {problem}")
    if version > newest:
        raise BadInputError(
            archive, f"was written by a newer kernelscope (format {version}); this one reads up to {newest}"
        )


_NUMBERS = re.compile(r"(U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?|FLOAT|DOUBLE|REAL|DECIMAL\(.*\))")


@cache
def _run_columns(table: str) -> dict[str, str]:
    """The columns of a run's ``table`` (events, kernels) as this kernelscope makes them, and their kinds (those of a
    trace with no events, loaded once)."""
    with tempfile.TemporaryDirectory(prefix="kernelscope-columns-") as folder:
        empty = Path(folder) / "empty.json"
        empty.write_bytes(b'{"traceEvents": []}')
        with Run(empty, allow_empty=True) as run:
            return _columns(run._con, table)


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    """``{column: kind}`` of ``table``: its type, every integer and floating type the one kind "number"."""
    rows = con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ?", [table]).fetchall()
    return {column: "number" if _NUMBERS.fullmatch(kind) else kind for column, kind in rows}


def check_columns(con: duckdb.DuckDBPyConnection, table: str, path: Path) -> None:
    """An archived run's ``table``, read from files like ``path``, has every column a run's has, of its kind: what
    the queries over a run read (a number where they add up)."""
    held = _columns(con, table)
    for column, kind in _run_columns(table).items():
        if held.get(column) != kind:
            what = "no column" if column not in held else f"a column of type {held[column]}, not {kind},"
            raise BadInputError(path, f"has {what} {column} (the archive is damaged, or not of this kernelscope)")
