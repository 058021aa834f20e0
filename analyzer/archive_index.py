"""An archive's runs index: the ``runs`` rows of many committed runs in one Parquet file, with each rank's token
and the schema of its data files, so that an archive of thousands of runs is listed by reading one file, and
its views read the data files of one schema as one list, without reading every file's footer first.

    ARCHIVE/.index/runs-<runs>-<token>.parquet     <runs>: how many runs it holds

An index is derived data, never the record of what is committed: readers take from it only the parts whose
``runs`` folder is there with the same token, and read every other committed part from its files. An add
writes a new index (whole: through a temporary file renamed into place) once INDEX_EVERY committed runs are
not in the newest one, then removes the smaller ones; it tells that by counting the folders of runs/, so an add
costs the same in an archive of any size. An index that cannot be read is ignored.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from .archive_commit import (
    _RUN,
    DATA_TABLES,
    Owner,
    Part,
    _names,
    committed_parts,
    ensure_dirs,
    file_list,
    new_token,
    own_folder,
    regular_files,
)
from .archive_verify import fingerprint
from .atomic import fsync_dir, fsync_file
from .connection import new_connection
from .sql import quote

INDEX = ".index"
INDEX_EVERY = 64
_INDEX_FILE = re.compile(r"runs-([0-9]{1,12})-([0-9a-z.]{1,80})\.parquet")
_PARTIAL = re.compile(r"\.runs-([0-9]+\.[0-9]+\.[0-9a-f]{12}\.[0-9a-f]{8})\.partial")
SCHEMA_COLUMNS = tuple(f"{table}_schema" for table in DATA_TABLES)
STAT_COLUMNS = tuple(f"{table}_stat" for table in DATA_TABLES)  # each file's size and mtime when indexed
_KEY = ("run_id", "rank", "token")


@dataclass
class Index:
    """The newest readable index, as it stands against the committed parts: ``schemas`` maps each part it holds
    that is still committed to its data files' schemas (by table); ``exact`` is False when it also holds parts
    that are not (removed by hand), whose rows must be left out."""

    path: Path | None = None
    schemas: dict[Part, dict[str, str]] = field(default_factory=dict)
    exact: bool = True
    stats: dict[str, str] = field(default_factory=dict)  # data file path -> its fingerprint when indexed


def _index_files(root: Path) -> list[tuple[int, str]]:
    try:
        names = os.listdir(root / INDEX)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted((int(m.group(1)), name) for name in names if (m := _INDEX_FILE.fullmatch(name)))


def read_index(con: duckdb.DuckDBPyConnection, root: Path, committed: list[Part]) -> Index:
    """The newest index of ``root`` against ``committed`` (an empty one where there is none, or it is unreadable)."""
    files = _index_files(root)
    if not files:
        return Index()
    path = root / INDEX / files[-1][1]
    if not path.is_file():  # a FIFO, on which DuckDB's open would wait forever: an index that cannot be read
        return Index()
    con.register("ks_committed", pd.DataFrame([(p.run_id, p.rank, p.token) for p in committed], columns=list(_KEY)))
    source = f"read_parquet({quote(str(path))})"
    try:  # counted in DuckDB and only the committed parts' rows taken: a file of kilobytes may repeat a row 10^6 times
        counted = f"SELECT count(*), count(DISTINCT ({', '.join(_KEY)})) FROM {source}"
        [(total, distinct)] = con.execute(counted).fetchall()
        if total != distinct:  # a part twice: no index an add wrote, and its rows would repeat in the views
            return Index()
        names = {d[0] for d in con.execute(f"SELECT * FROM {source} LIMIT 0").description}
        stats = [c if c in names else "NULL" for c in STAT_COLUMNS]  # an older index recorded none
        rows = con.execute(
            f"SELECT {', '.join(_KEY + SCHEMA_COLUMNS)}, {', '.join(stats)} FROM {source} "
            f"SEMI JOIN ks_committed USING ({', '.join(_KEY)})"
        ).fetchall()
    except duckdb.Error:
        return Index()
    finally:
        con.unregister("ks_committed")
    width, held, recorded = len(_KEY), {}, {}
    for row in rows:
        part = Part(*row[:width])
        held[part] = dict(zip(DATA_TABLES, row[width : width + len(DATA_TABLES)], strict=True))
        for table, stat in zip(DATA_TABLES, row[width + len(DATA_TABLES) :], strict=True):
            if stat is not None:
                recorded[str(part.path(root, table))] = stat
    return Index(path, held, exact=len(held) == total, stats=recorded)


def file_schemas(con: duckdb.DuckDBPyConnection, root: Path, parts: list[Part]) -> pd.DataFrame:
    """Each part's key and, per data table, its file's schema (the Parquet columns and types, sorted): files of
    one schema are read as one list; and its fingerprint (archive_verify.fingerprint), which spares a reader the
    check of its footer while the file is the one indexed."""
    frame = pd.DataFrame([(p.run_id, p.rank, p.token) for p in parts], columns=list(_KEY))
    for table, column in zip(DATA_TABLES, SCHEMA_COLUMNS, strict=True):
        paths = regular_files([part.path(root, table) for part in parts])
        files = file_list(paths)
        described = con.execute(
            "SELECT file_name, string_agg(col, ', ' ORDER BY col) FROM (SELECT file_name, "
            f"concat_ws(' ', name, type, CAST(logical_type AS VARCHAR)) AS col FROM parquet_schema({files})) "
            "GROUP BY file_name"
        ).fetchall()
        by_file = dict(described)
        frame[column] = [by_file[str(part.path(root, table))] for part in parts]
        frame[f"{table}_stat"] = [fingerprint(os.stat(path)) for path in paths]
    return frame


def refresh_index(root: Path, runs_of) -> Path | None:
    """Write a new index when INDEX_EVERY committed runs are not in the newest one; ``runs_of(parts)`` is the
    query of the ``runs`` rows of ``parts`` from their files. Returns the index written, if any."""
    _remove_dead_partials(root)
    files = _index_files(root)
    run_folders = sum(1 for name in _names(root / "runs") if _RUN.fullmatch(name))
    if run_folders - (files[-1][0] if files else 0) < INDEX_EVERY:
        return None
    con = new_connection()
    try:
        committed = committed_parts(root)
        index = read_index(con, root, committed)
        new = [part for part in committed if part not in index.schemas]
        runs = len({part.run_id for part in committed})
        if not new:
            return None
        con.register("ks_new_parts", file_schemas(con, root, new))
        held = f"SELECT * FROM read_parquet({quote(str(index.path))})" if index.schemas else None
        if held is not None and not index.exact:
            kept = pd.DataFrame([(p.run_id, p.rank, p.token) for p in index.schemas], columns=list(_KEY))
            con.register("ks_kept_parts", kept)
            held += " SEMI JOIN ks_kept_parts USING (run_id, rank, token)"
        added = (
            f"SELECT f.*, n.* EXCLUDE (run_id, rank) FROM ({runs_of(new)}) f JOIN ks_new_parts n USING (run_id, rank)"
        )
        rows = added if held is None else f"({held}) UNION ALL BY NAME ({added})"
        folder = ensure_dirs(root, INDEX)
        token = new_token()
        partial = folder / f".runs-{token}.partial"
        target = folder / f"runs-{runs}-{token}.parquet"
        try:
            con.execute(f"COPY ({rows}) TO {quote(str(partial))} (FORMAT parquet)")
            fsync_file(partial)
            os.rename(partial, target)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        fsync_dir(folder)
    finally:
        con.close()
    for count, name in _index_files(root):
        if count < runs:  # superseded; a reader that listed it opens the archive again
            (folder / name).unlink(missing_ok=True)
    return target


def _remove_dead_partials(root: Path) -> None:
    folder = own_folder(root, INDEX)  # a link to a folder elsewhere is refused, nothing removed through it
    for name in _names(folder) if folder is not None else []:
        match = _PARTIAL.fullmatch(name)
        if match and Owner.of_token(match.group(1)).is_dead():
            (folder / name).unlink(missing_ok=True)
