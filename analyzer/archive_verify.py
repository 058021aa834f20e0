"""What an archive's Parquet files are checked against before any is read as a table: each file a regular file of
the archive (not a link), its columns those this kernelscope writes (less the ones an older one did not), its rows
as many as the archive's record of its run says (the ``runs`` row counts each rank's events, kernels and samples),
and its footer naming the run, rank and add it was written for (PART_KEY). A footer's word is read from the
footer only: a file that lies about all of this consistently is read as what it says, but a file swapped between
runs, cut, grown, rewritten by another tool or of another schema is refused in one sentence naming it."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from .archive_commit import DATA_TABLES, Part, file_list, regular_files
from .errors import BadInputError

if TYPE_CHECKING:  # archive_index.py imports this module
    from .archive_index import Index

PART_KEY = "kernelscope_part"  # key-value metadata of every file an add writes: "<run_id>/<rank>/<token>"
# A footer's min and max of a column are believed by these optimizers (a filter skips the row groups they rule
# out, max() answers from them): on a connection that reads an archive's files they are off, so that a footer
# that lies about them changes no answer, and so is the page index (the same figures per page).
UNBELIEVED_STATISTICS = (
    "SET disabled_optimizers = 'statistics_propagation,filter_pushdown,row_group_pruner';"
    "SET parquet_use_page_index = false"
)
BELIEVED_STATISTICS = "RESET disabled_optimizers; RESET parquet_use_page_index"

_NUMBER = "number"
_UTF8, _JSON, _TIME, _LIST = "UTF8", "JSON", "TIMESTAMP_MICROS", "LIST"
COLUMNS: dict[str, dict[str, str]] = {  # what an add writes, kinds as kind() tells them (test_archive_verify checks)
    "events": {
        **dict.fromkeys(("event_id", "pid", "tid", "ts_ns", "dur_ns", "correlation", "external_id"), _NUMBER),
        **dict.fromkeys(("device", "stream", "flow_id"), _NUMBER),
        **dict.fromkeys(("ph", "cat", "name", "pid_name", "tid_name"), _UTF8),
        "args": _JSON,
    },
    "kernels": {
        **dict.fromkeys(("module_name", "function_name", "op", "kernel", "call_op", "kind"), _UTF8),
        **dict.fromkeys(("kernel_us", "start_us", "device", "stream", "sample_id", "thread"), _NUMBER),
        **dict.fromkeys(("correlation", "event_id", "call_event_id"), _NUMBER),
    },
    "samples": {
        **dict.fromkeys(("function_name", "signature"), _UTF8),
        **dict.fromkeys(("sample_id", "calls", "tensor_bytes"), _NUMBER),
        **dict.fromkeys(("args", "kwargs"), _JSON),
    },
    "runs": {
        **dict.fromkeys(("name", "source", "hostname", "device", "gpu_name", "torch_version"), _UTF8),
        **dict.fromkeys(("cuda_version", "python_version", "platform", "kernelscope_version"), _UTF8),
        **dict.fromkeys(("backend", "git_commit", "module_prefix", "function_prefix"), _UTF8),
        **dict.fromkeys(("archived_at", "start_time"), _TIME),
        **dict.fromkeys(("world_size", "kernels", "kernel_us", "events", "samples"), _NUMBER),
        **dict.fromkeys(("launches", "device_events"), _NUMBER),
        **dict.fromkeys(("launches_without_device_event", "device_events_without_launch"), _NUMBER),
        "command_line": _LIST,
        **dict.fromkeys(("tags", "manifest"), _JSON),
    },
}
OLDER = {  # columns an archive of an older kernelscope lacks, read as NULL (archive_read.load_run_tables)
    "events": {"pid_name", "tid_name"},
    "kernels": {"call_event_id"},
    "samples": set(),
    "runs": {"events", "samples"},
}
_PHYSICAL_NUMBERS = {"INT32", "INT64", "FLOAT", "DOUBLE"}
_INTEGER_ANNOTATIONS = {None, "INT_8", "INT_16", "INT_32", "INT_64", "UINT_8", "UINT_16", "UINT_32", "UINT_64"}

Records = dict[tuple[str, int], dict[str, int | None]]  # (run_id, rank) -> rows recorded per data table


def part_identity(part: Part) -> str:
    return f"{part.run_id}/{part.rank}/{part.token}"


def kind(physical: str | None, converted: str | None) -> str:
    """A Parquet column's kind: every integer and floating type "number" (their widths may differ between
    kernelscope versions), otherwise its annotation (UTF8, JSON, LIST, TIMESTAMP_MICROS) or physical type."""
    if physical in _PHYSICAL_NUMBERS and converted in _INTEGER_ANNOTATIONS:
        return _NUMBER
    return converted or physical or "GROUP"


def fingerprint(status: os.stat_result) -> str:
    """A file's size and modification time: the runs index records them, and a file that still has them is the
    one whose footer was read when it was indexed (an archive never rewrites a file in place)."""
    return f"{status.st_size}:{status.st_mtime_ns}"


def verify(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    parts: list[Part],
    table: str,
    records: Records,
    indexed: dict[str, str] | None = None,
) -> None:
    """Fail, naming the file, unless every part's file of ``table`` is what the archive wrote for it. ``records``:
    the rows the ``runs`` row of each part counts (None: not counted there, by an older kernelscope; the ``runs``
    file itself must hold one row). A part whose ``runs`` row counts its events was written with PART_KEY, which
    its every file must then hold. ``indexed``: the fingerprints the runs index recorded; a file that still has its
    own is not read again (thousands of footers cost seconds), any other is."""
    files = {}
    for part in parts:
        path = str(part.path(root, table))
        status = _lstat(Path(path))
        if status is not None and stat.S_ISLNK(status.st_mode):
            raise BadInputError(path, "is a symbolic link, which no archive holds (the archive is damaged)")
        if status is None or indexed is None or indexed.get(path) != fingerprint(status):
            files[path] = part
    if not files:
        return
    listed = file_list(regular_files([Path(path) for path in files]))
    schema = f"SELECT file_name, name, type, converted_type, num_children FROM parquet_schema({listed})"
    columns, twice = _top_columns(con.execute(schema).fetchall())
    rows = dict(con.execute(f"SELECT file_name, num_rows FROM parquet_file_metadata({listed})").fetchall())
    groups = dict(
        con.execute(
            f"SELECT file_name, sum(row_group_num_rows) FROM (SELECT DISTINCT file_name, row_group_id, "
            f"row_group_num_rows FROM parquet_metadata({listed})) GROUP BY file_name"
        ).fetchall()
    )
    keys = dict(
        con.execute(
            f"SELECT file_name, value FROM parquet_kv_metadata({listed}) WHERE key = ?", [PART_KEY.encode()]
        ).fetchall()
    )
    for path, part in files.items():
        held = columns.get(path, {})
        if path in twice:
            raise BadInputError(path, f"has the column {twice[path]!r} twice (the archive is damaged)")
        _check_columns(path, table, held, typed=rows.get(path) != 0)
        record = records.get((part.run_id, part.rank), {})
        expected = 1 if table == "runs" else record.get(table)
        counted = {rows.get(path, 0), groups.get(path) or 0}
        if expected is not None and counted != {expected}:
            said = " or ".join(f"{n:,}" for n in sorted(counted))
            whose = "one row of its rank" if table == "runs" else f"{expected:,} (its run's runs row says so)"
            raise BadInputError(path, f"holds {said} rows where the archive recorded {whose}; the archive is damaged")
        stamped = "events" in held if table == "runs" else record.get("events") is not None
        if (stamped or path in keys) and keys.get(path) != part_identity(part).encode():  # bytes: any, UTF-8 or not
            named = keys[path].decode(errors="backslashreplace") if path in keys else None
            found = f"names the part '{named}'" if path in keys else f"names no part ({PART_KEY})"
            raise BadInputError(path, f"{found}, not {part_identity(part)!r} (the archive is damaged)")


def verify_view(con: duckdb.DuckDBPyConnection, root: Path, parts: list[Part], index: Index, table: str) -> None:
    """Check the files the archive's view of ``table`` reads (over ``parts``, with the runs ``index``) against the
    archive's record: a data table's against the rows of the runs view (but the files the index holds as they were
    then), the runs files the index does not hold against themselves."""
    if table == "runs":
        verify(con, root, [p for p in parts if p not in index.schemas], table, {})
    else:
        verify(con, root, parts, table, recorded_rows(con, "SELECT * FROM runs"), index.stats)


def recorded_rows(con: duckdb.DuckDBPyConnection, runs: str) -> Records:
    """The rows each rank's ``runs`` row (of the query ``runs``) counts per data table: None where an older
    kernelscope counted none."""
    names = {d[0] for d in con.execute(f"SELECT * FROM ({runs}) LIMIT 0").description}
    counts = ", ".join(f"{t}" if t in names else "NULL" for t in DATA_TABLES)
    rows = con.execute(f"SELECT run_id, rank, {counts} FROM ({runs})").fetchall()
    return {(run_id, rank): dict(zip(DATA_TABLES, counted, strict=True)) for run_id, rank, *counted in rows}


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:  # left to DuckDB's read, which names it as missing
        return None
    except OSError as exc:
        raise BadInputError(path, f"cannot be read ({exc.strerror or exc})") from None


def _top_columns(schema: Iterable[tuple]) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """``{file: {column: kind}}`` of the top-level columns of each file, from parquet_schema's rows (each file's
    root first, then its columns depth-first, each group followed by its ``num_children`` children), and
    ``{file: column}`` of the files that name a column twice (DuckDB reads the second under another name)."""
    out: dict[str, dict[str, str]] = {}
    twice: dict[str, str] = {}
    left: dict[str, list[int]] = {}  # per file: the children still to come of each open group, innermost last
    for file_name, name, physical, converted, children in schema:
        if file_name not in out:  # the root
            out[file_name], left[file_name] = {}, [children or 0]
            continue
        stack = left[file_name]
        if len(stack) == 1:
            if name in out[file_name]:
                twice.setdefault(file_name, name)
            out[file_name][name] = kind(physical, converted)
        stack[-1] -= 1
        if children:
            stack.append(children)
        while len(stack) > 1 and stack[-1] <= 0:
            stack.pop()
    return out, twice


def _check_columns(path: str, table: str, held: dict[str, str], typed: bool) -> None:
    """``held`` has the columns of ``table``, but those an older kernelscope did not write; of their kinds where
    ``typed`` (a file of no rows may hold any: an add wrote a bare trace's empty samples from pandas' guess)."""
    wanted = COLUMNS[table]
    for column, found in held.items():
        if column not in wanted:
            raise BadInputError(path, f"has a column {column!r} that no {table} file of an archive holds (damaged)")
        if typed and found != wanted[column]:
            raise BadInputError(path, f"has a column {column!r} of type {found}, not {wanted[column]} (damaged)")
    missing = sorted(set(wanted) - set(held) - OLDER[table])
    if missing:
        raise BadInputError(path, f"lacks the column {missing[0]!r} of every {table} file of an archive (damaged)")
