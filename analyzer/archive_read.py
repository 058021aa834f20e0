"""Reading an archive's Parquet parts: the query of one table over the files of committed parts, a run's tables
read back as a Run's, and the check an add makes that the archive reads before it adds to it."""

from __future__ import annotations

from pathlib import Path

import duckdb

from . import samples
from .archive_checks import archived_manifest, archived_sample, check_columns
from .archive_commit import _RUN, DATA_TABLES, TABLES, Part, _names, committed_parts, file_list, regular_files
from .archive_index import read_index
from .archive_verify import BELIEVED_STATISTICS, UNBELIEVED_STATISTICS, recorded_rows, verify
from .connection import new_connection
from .errors import BadInputError
from .rank_parts import LaunchCheck, RankPart
from .samples import check_totals
from .sql import quote, sql_template


def read_files(root: Path, parts: list[Part], table: str, options: str = "", union: str = "true") -> str:
    """The query of ``table`` over the files of ``parts`` (archive_view.sql); a missing file is bad input."""
    listed = file_list(regular_files([part.path(root, table) for part in parts]))
    return sql_template("archive_view.sql").substitute(files=listed, options=options, union=union)


def damaged(archive: Path, exc: duckdb.Error, more: str = "") -> BadInputError:
    """The archive named as damaged, by the first line of DuckDB's error (which names the file)."""
    lines = str(exc).strip().splitlines()
    return BadInputError(archive, f"is damaged: {lines[0] if lines else type(exc).__name__}{more}")


def check_readable(archive: Path, root: Path) -> None:
    """Fail, naming the file, unless the footer of every Parquet file of the committed runs that the newest runs
    index does not hold reads, and is what the archive's record says (archive_verify.py). An index is written only
    from files whose footers read, so an add reads the footers of the runs added since (fewer than INDEX_EVERY,
    where adds write it), whatever the archive's size."""
    con = new_connection()
    try:
        indexed = _indexed_runs(con, root)
        ids = [name[len("run_id=") :] for name in _names(root / "runs") if _RUN.fullmatch(name)]
        parts = [part for run_id in ids if run_id not in indexed for part in committed_parts(root, run_id)]
        files = regular_files([part.path(root, table) for part in parts for table in TABLES])
        if not files:
            return
        try:
            con.execute(f"SELECT count(*) FROM parquet_file_metadata({file_list(files)})").fetchall()
            verify(con, root, parts, "runs", {})
            records = recorded_rows(con, read_files(root, parts, "runs"))
            for table in DATA_TABLES:
                verify(con, root, parts, table, records)
        except duckdb.Error as exc:
            raise damaged(archive, exc, "; nothing was added") from None
        except BadInputError as exc:  # a file not what the archive's record says: every later read would refuse it
            raise BadInputError(exc.path, f"{exc.problem}; nothing was added") from None
    finally:
        con.close()


def _indexed_runs(con: duckdb.DuckDBPyConnection, root: Path) -> set[str]:
    """The run ids the newest readable runs index holds, committed or not (each once, however often it repeats)."""
    path = read_index(con, root, []).path
    if path is None:
        return set()
    try:
        rows = con.execute(f"SELECT DISTINCT run_id FROM read_parquet({quote(str(path))})").fetchall()
    except duckdb.Error:  # superseded and removed since: every committed part is read
        return set()
    return {run_id for (run_id,) in rows}


def load_run_tables(con: duckdb.DuckDBPyConnection, root: Path, run_id: str) -> tuple[list[RankPart], tuple[str, str]]:
    """The archived run ``run_id``'s events and kernels made tables of ``con``; its ranks' parts (manifest, samples,
    launch counts) and its prefixes, each checked as a run directory's are."""
    parts = committed_parts(root, run_id)
    con.execute(UNBELIEVED_STATISTICS)  # while its files are read: its tables' own statistics are DuckDB's
    verify(con, root, parts, "runs", {})
    records = recorded_rows(con, read_files(root, parts, "runs"))
    for table in DATA_TABLES:
        verify(con, root, parts, table, records)
    con.execute(
        f"CREATE TABLE events AS SELECT * EXCLUDE (run_id, rank), rank FROM ({read_files(root, parts, 'events')}) "
        "ORDER BY rank, event_id"
    )
    con.execute(
        f"CREATE TABLE kernels AS SELECT * EXCLUDE (run_id, rank), rank FROM ({read_files(root, parts, 'kernels')}) "
        "ORDER BY rank, start_us, event_id"
    )
    con.execute("ALTER TABLE kernels ADD COLUMN IF NOT EXISTS call_event_id BIGINT")  # an older archive's run
    for column in ("pid_name", "tid_name"):  # an older archive's run, whose named threads it did not keep
        con.execute(f"ALTER TABLE events ADD COLUMN IF NOT EXISTS {column} VARCHAR")
    for table in ("events", "kernels"):
        check_columns(con, table, parts[0].path(root, table))
    samples_query = (
        f"SELECT rank, function_name, calls, CAST(args AS VARCHAR) AS args, CAST(kwargs AS VARCHAR) AS kwargs "
        f"FROM ({read_files(root, parts, 'samples', ', file_row_number = true')})"
    )
    _check_samples_size(con, root, parts, samples_query)
    samples = con.execute(f"{samples_query} ORDER BY rank, file_row_number").fetchall()
    rows = con.execute(  # one a rank: a file repeating its row thousands of times is not read whole to be refused
        f"SELECT rank, CAST(manifest AS VARCHAR), module_prefix, function_prefix, "
        f"{', '.join(LaunchCheck.__dataclass_fields__)} FROM ({read_files(root, parts, 'runs')}) ORDER BY rank "
        f"LIMIT {len(parts) + 1}"
    ).fetchall()
    files = {part.rank: part for part in parts}
    if sorted(row[0] for row in rows) != sorted(files):
        raise BadInputError(parts[0].path(root, "runs"), "does not hold one row of its rank (damaged)")
    function_data: dict[int, dict] = {row[0]: {} for row in rows}
    for rank, name, calls, args, kwargs in samples:
        function_data[rank].setdefault(name, []).append(
            (calls, archived_sample(files[rank].path(root, "samples"), name, calls, args, kwargs))
        )
    for rank, data in function_data.items():
        check_totals(data, files[rank].path(root, "samples"))
    parts = []
    for rank, manifest, module_prefix, function_prefix, *check in rows:
        where = files[rank].path(root, "runs")
        if not all(isinstance(prefix, str) and prefix for prefix in (module_prefix, function_prefix)):
            raise BadInputError(where, "has a module_prefix or function_prefix that is not a non-empty string")
        if not all(type(value) is int and value >= 0 for value in check):
            raise BadInputError(where, "has launch counts that are not integers >= 0")
        parts.append(RankPart(rank, archived_manifest(where, manifest), function_data[rank], LaunchCheck(*check)))
    con.execute(BELIEVED_STATISTICS)
    return parts, (rows[0][2], rows[0][3])


ENTRY_BYTES = 40  # what samples.json spends on an entry beside its text: {"calls": 1, "args": …, "kwargs": …}


def _check_samples_size(con: duckdb.DuckDBPyConnection, root: Path, parts: list[Part], query: str) -> None:
    """Refuse a rank's archived samples that samples.json would hold in more bytes than a run directory's may take
    (samples.samples_limit_bytes), counted by DuckDB before any row is read into Python: a Parquet file of kilobytes
    may repeat one row millions of times."""
    limit = samples.samples_limit_bytes()
    sizes = con.execute(
        f"SELECT rank, sum(strlen(function_name) + strlen(args) + strlen(kwargs) + ?) FROM ({query}) GROUP BY rank",
        [ENTRY_BYTES],
    ).fetchall()
    files = {part.rank: part.path(root, "samples") for part in parts}
    for rank, size in sizes:
        if size is not None and size > limit:
            raise BadInputError(files[rank], f"holds more than the {limit:,} bytes a sample store may take here")
