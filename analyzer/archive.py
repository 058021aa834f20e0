"""An archive of runs: hive-partitioned Parquet that DuckDB, Spark, pyarrow or polars read as it is.

    ARCHIVE/kernelscope-archive.json        marks the folder as an archive (format version)
    ARCHIVE/<table>/run_id=<id>/rank=<rank>/part-<token>.parquet    for table in events, kernels, samples, runs

A run's id is a hash of the files it was loaded from, so archiving the same run again finds it there and
changes nothing. Many processes may add to one archive at once, without a lock: a run is complete when its
``runs`` folder is renamed into place, and the views read only the files of complete runs
(archive_commit.py; docs/format.md, "Archives").
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import os
import re
from pathlib import Path

import duckdb
import orjson
import pandas as pd

from .archive_checks import check_creatable, check_format
from .archive_commit import _RUN, STAGING, TABLES, Add, Part, _names, committed_parts, remove_dead_adds, unmake_archive
from .archive_index import SCHEMA_COLUMNS, STAT_COLUMNS, Index, read_index, refresh_index
from .archive_read import check_readable, damaged, load_run_tables, read_files
from .archive_verify import PART_KEY, UNBELIEVED_STATISTICS, part_identity, verify_view
from .atomic import errors_naming, unreadable_link, unwritten, write_bytes_atomically
from .connection import new_connection
from .errors import BadInputError, KernelscopeError
from .kernel_names import define_kernel_short
from .rank_parts import LaunchCheck
from .ranks import ARCHIVE_MARKER, find_ranks, trace_start
from .run import Run
from .rundir import MANIFEST
from .samples import encode
from .sql import quote, sql_text
from .user_queries import query_frame
from .whole_reads import identity, read_whole

MARKER = ARCHIVE_MARKER
_LISTED_AGAIN: list = []  # connect()'s parts on its second try, the archive listed again (compared by identity)
ARCHIVE_FORMAT = 1


def is_archive(path: str | os.PathLike) -> bool:
    return (Path(path) / MARKER).is_file()


def run_id_of(path: str | os.PathLike) -> str:
    """``run-`` and 12 hex digits of a SHA-256 over every rank's manifest, sample store and trace bytes."""
    path = Path(path)
    digest = hashlib.sha256()
    for source in find_ranks(path, notice=False):  # Run says what it leaves out
        files = [source.trace] if source.manifest is None else [source.trace.parent / MANIFEST]
        files += [] if source.manifest is None else [source.samples, source.trace]
        for file in files:
            try:
                digest.update(f"{source.rank}:{file.name}:{file.stat().st_size}:".encode())
                with open(file, "rb") as stream:
                    for chunk in iter(lambda s=stream: s.read(1 << 20), b""):
                        digest.update(chunk)
            except OSError as exc:
                raise BadInputError(file, f"cannot be read ({exc.strerror or exc})") from None
    return "run-" + digest.hexdigest()[:12]


class Archive:
    """An archive folder: add runs, list them, query across them, reproduce one as a Run."""

    def __init__(self, path: str | os.PathLike, *, create: bool | str = False):
        self.path = Path(path)
        self.root = Path(os.path.abspath(self.path))  # what DuckDB is given: no '~' of its own to expand
        # create="on add": made by the first add once its run has loaded, so a run that fails leaves no empty archive
        self._unmade = not is_archive(self.path)
        if self._unmade:
            if not create:
                there = self.path.exists()
                problem = f"is not a kernelscope archive (no {MARKER})" if there else unreadable_link(self.path)
                problem = problem or "does not exist"
                raise BadInputError(self.path, problem)
            check_creatable(self.path, self.root) if create == "on add" else self._create()
        else:
            check_format(self.path, self.root / MARKER, ARCHIVE_FORMAT)
        self._con: duckdb.DuckDBPyConnection | None = None
        self._parts: list[Part] = []
        self._index = Index()
        self._views: set[str] = set()

    def _create(self) -> bool | None:
        """Make the folder an archive; safe when other processes create the same archive at the same time (the
        marker is written before anything else, and whole, so a folder holding more is one already). Returns
        whether it made the folder as well as the marker, None where it wrote no marker."""
        check_creatable(self.path, self.root)
        made_folder = False
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.root, 0o777)
            made_folder = True
        others = [n for n in os.listdir(self.root) if not n.startswith(f".{MARKER}.")] if self.root.is_dir() else None
        if others is None or others and not is_archive(self.root):  # the marker is read after the listing it precedes
            raise KernelscopeError(self.path, f"exists and is not a kernelscope archive (no {MARKER})")
        if not others:
            marker = orjson.dumps({"kernelscope_archive": ARCHIVE_FORMAT})
            write_bytes_atomically(self.root / MARKER, marker, output=False)  # the runs are the archive's output
        check_format(self.path, self.root / MARKER, ARCHIVE_FORMAT)
        self._unmade = False
        return made_folder if not others else None

    def run_ids(self) -> list[str]:
        """The ids of the complete runs, sorted."""
        return sorted({part.run_id for part in committed_parts(self.root)})

    def files(self, table: str) -> list[Path]:
        """The Parquet files of ``table`` (events, kernels, samples, runs) of the complete runs, by run and rank:
        what another engine should read, since a table's folder may also hold the files of an add in progress
        or of one that was killed (until the next add removes them)."""
        if table not in TABLES:
            raise ValueError(f"table must be one of {TABLES}, not {table!r}")
        return [part.path(self.root, table) for part in committed_parts(self.root)]

    def add(
        self, source: str | os.PathLike, *, module_prefix: str | None = None, function_prefix: str | None = None
    ) -> tuple[str, bool]:
        """Archive the run (directory, job directory or trace) at ``source``; ``(run_id, added)``, where
        ``added`` is False when the archive already held it (and nothing was written). What adds killed
        earlier left is removed first."""
        source = Path(source)
        hashed = identity(source)
        run_id = run_id_of(source)
        remove_dead_adds(self.root)
        if not self._unmade:  # an add to a damaged archive would report success where no listing of it reads
            check_readable(self.path, self.root)
        if committed_parts(self.root, run_id):
            return run_id, False

        def read() -> tuple[str, Run]:  # the id and the tables of one run, where record --force replaces it meanwhile
            read_id = run_id if identity(source) == hashed else run_id_of(source)
            return read_id, Run(source, module_prefix=module_prefix, function_prefix=function_prefix)

        read_id, loaded = read_whole(source, read, lambda got: got[1].close())
        if read_id != run_id and committed_parts(self.root, read_id):  # the run that replaced it is archived
            loaded.close()
            return read_id, False
        run_id = read_id
        with loaded as run:
            with errors_naming(self.path, self.root / STAGING):  # the folder made absolute: named as given
                made, add = self._create() if self._unmade else None, None
            try:
                add = Add(self.root, run_id)
                with errors_naming(self.path, self.root / STAGING):
                    self._stage(run, source, add)
                    added = add.commit(list(run.parts))
            except BaseException as exc:
                if add is not None:
                    add.abandon()
                if made is not None and unmake_archive(self.root, made):  # the archive it made would hold no run
                    self._unmade = True
                if isinstance(exc, duckdb.Error):  # a full disk: DuckDB's message names a file of the add's staging
                    raise unwritten(self.path, exc) from None
                raise
        self._con = None
        if added:
            try:
                refresh_index(self.root, lambda parts: self._read(parts, "runs"))
            except (OSError, duckdb.Error, KernelscopeError):  # the run is archived; readers read it from its files
                pass
        return run_id, added

    def _stage(self, run: Run, source: Path, add: Add) -> None:
        con = run.con
        archived_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        for rank, part in run.parts.items():
            identity = quote(part_identity(Part(add.run_id, rank, add.token)))

            def target(table: str, rank: int = rank, identity: str = identity) -> str:
                """The staged file, and the options that write it with the part it is of in its footer."""
                return f"{quote(str(add.staged(table, rank)))} (FORMAT parquet, KV_METADATA {{{PART_KEY}: {identity}}})"

            con.execute(
                f"COPY (SELECT * EXCLUDE (rank) FROM events WHERE rank = {rank} ORDER BY event_id) "
                f"TO {target('events')}"
            )
            con.execute(
                f"COPY (SELECT * EXCLUDE (rank) FROM kernels WHERE rank = {rank} "
                f"ORDER BY start_us, event_id) TO {target('kernels')}"
            )
            con.register("ks_samples_out", _samples_with_arguments(run, rank))
            con.execute(
                "COPY (SELECT * REPLACE (CAST(args AS JSON) AS args, CAST(kwargs AS JSON) AS kwargs) "
                f"FROM ks_samples_out) TO {target('samples')}"
            )
            con.unregister("ks_samples_out")
            variables = {
                "manifest": orjson.dumps(part.manifest).decode(),
                "name": os.fsencode(source.name).decode(errors="backslashreplace"),  # DuckDB takes UTF-8 only
                "source": os.fsencode(source.resolve()).decode(errors="backslashreplace"),
                "archived_at": archived_at,
                "trace_start": trace_start(con, part.header.keys if part.header else {}, rank) or "",  # a bare trace's
                "device": run.device,
                "module_prefix": run.module_prefix,
                "function_prefix": run.function_prefix,
            }
            for key, value in variables.items():
                con.execute(f"SET VARIABLE {key} = {quote(value)}")
            con.execute(f"SET VARIABLE rank = {int(rank)}")
            for key, value in zip(LaunchCheck.__dataclass_fields__, _check_values(part.check), strict=True):
                con.execute(f"SET VARIABLE {key} = {int(value)}")
            con.execute(f"COPY ({sql_text('archive_row.sql')}) TO {target('runs')}")

    def connect(self, tables: tuple[str, ...] = TABLES, parts: list[Part] | None = None) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB with the views runs, events, kernels, samples (those of ``tables`` at least, the
        others made when a query of ``sql()`` names them) over every archived run (the runs complete when it
        connected; ``parts``: those, where the caller has just listed them)."""
        again = parts is _LISTED_AGAIN
        if self._con is None:
            parts = committed_parts(self.root) if parts is None or again else parts
            if not parts:
                raise BadInputError(self.path, "holds no runs yet (kernelscope archive RUN --to ARCHIVE adds them)")
            con = new_connection()
            con.execute("SET TimeZone = 'UTC'")  # times print the same on every machine
            con.execute("SET parquet_metadata_cache = true")  # the footers verify() read are those the views read
            con.execute(UNBELIEVED_STATISTICS)
            define_kernel_short(con)
            self._con, self._parts, self._index, self._views = con, parts, read_index(con, self.root, parts), set()
        data = [t for t in tables if t != "runs"]
        for table in (t for t in ("runs",) * bool(data) + tables if t not in self._views):  # runs: the record
            try:
                verify_view(self._con, self.root, self._parts, self._index, table)
                self._con.execute(f"CREATE VIEW {table} AS {self._view(self._con, self._parts, self._index, table)}")
            except (duckdb.Error, BadInputError) as exc:  # a footer missing, not Parquet, or not what it must be
                self.close()
                if self._superseded(exc) and not again:  # an add replaced the index it listed: once more
                    return self.connect(tables, _LISTED_AGAIN)
                raise self._damaged(exc) if isinstance(exc, duckdb.Error) else exc from None
            self._views.add(table)
        return self._con

    def _superseded(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the read of the runs index this connection listed, which an add has since replaced."""
        index = self._index.path
        return isinstance(exc, duckdb.IOException) and index is not None and not index.exists()

    def _view(self, con: duckdb.DuckDBPyConnection, parts: list[Part], index: Index, table: str) -> str:
        """The query of ``table`` over the committed ``parts``: those the runs index holds from it (``runs``) or from
        their files, a list per schema the index records (data tables); the others from their files."""
        new = [part for part in parts if part not in index.schemas]
        pieces = [self._read(new, table)] if new else []
        if index.schemas and table == "runs":
            derived = ", ".join(quote(c) for c in ("token", *SCHEMA_COLUMNS, *STAT_COLUMNS))
            held = f"SELECT COLUMNS(lambda c: c NOT IN ({derived})) FROM read_parquet({quote(str(index.path))})"
            if not index.exact:  # it holds runs removed since: only the committed ones are read
                keys = [(p.run_id, p.rank, p.token) for p in index.schemas]
                con.register("ks_index_parts", pd.DataFrame(keys, columns=["run_id", "rank", "token"]))
                held += " SEMI JOIN ks_index_parts USING (run_id, rank, token)"
            pieces.insert(0, held)
        elif index.schemas:
            groups: dict[str, list[Part]] = {}
            for part, schemas in index.schemas.items():
                groups.setdefault(schemas[table], []).append(part)
            by_width = sorted(groups.items(), key=lambda item: (-item[0].count(","), item[0]))  # widest first
            pieces[:0] = [self._read(sorted(group, key=_part_key), table, union="false") for _, group in by_width]
        return " UNION ALL BY NAME ".join(f"({piece})" for piece in pieces)

    def _read(self, parts: list[Part], table: str, options: str = "", union: str = "true") -> str:
        return read_files(self.root, parts, table, options, union)

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        return self.connect()

    def sql(self, query: str) -> pd.DataFrame:
        """Any SQL across the archived runs (docs/sql.md, "Archives"); a file of a complete run that is gone (removed
        by hand) is bad input of the archive. Only the views whose names the query holds are made (each one lists
        its files: a cost that grows with the archive)."""
        tables = tuple(t for t in TABLES if re.search(rf"\b{t}\b", query, re.IGNORECASE))
        return self._query(query, tables, ours=False)

    def _query(
        self, query: str, tables: tuple[str, ...], parts: list[Part] | None = None, *, ours: bool = True
    ) -> pd.DataFrame:
        """``query`` over the views of ``tables``. A failure to read the archive's files is bad input of the archive:
        any error of a query of kernelscope's own (``ours``), and of the user's one that names a file inside it."""
        for attempt in range(2):
            try:
                return query_frame(self.connect(tables, parts if attempt == 0 else None), query, sorted(TABLES))
            except duckdb.Error as exc:
                if not (ours or isinstance(exc, duckdb.IOException) or self._names_a_file(exc)):
                    raise
                if isinstance(exc, duckdb.IOException) and attempt == 0 and self._index.path is not None:
                    self.close()  # the index it read was superseded since
                    continue
                raise self._damaged(exc) from None
        raise AssertionError("unreachable")

    def _names_a_file(self, exc: duckdb.Error) -> bool:
        return f"{self.root}{os.sep}" in str(exc)

    def _damaged(self, exc: duckdb.Error) -> BadInputError:
        return damaged(self.path, exc)

    def runs(self) -> pd.DataFrame:
        """One line per archived run, oldest first."""
        parts = committed_parts(self.root) if self._con is None else None  # listed once: it grows with the archive
        if parts == []:
            return pd.DataFrame(columns=["run_id", "name", "start_time", "ranks", "hosts", "kernels", "kernel_us"])
        return self._query(sql_text("archive_list.sql"), ("runs",), parts)

    def resolve(self, ref: str) -> str:
        """The run id that ``ref`` names: an id, a unique prefix of one, or a unique run name."""
        if not ref:  # a prefix of every id: it would pick an archive's only run
            raise BadInputError(self.path, f"names no run by empty text (kernelscope runs {self.path} lists them)")
        if committed_parts(self.root, ref):  # an id: found without listing the archive
            return ref
        ids = self.run_ids()
        matches = [i for i in ids if i.startswith(ref)] or (
            self.sql(f"SELECT DISTINCT run_id FROM runs WHERE name = {quote(ref)} ORDER BY 1")["run_id"].tolist()
            if ids and ref == ref.encode("utf-8", "ignore").decode()
            else []  # a name of bytes not UTF-8 names no run: DuckDB takes no such text
        )
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise BadInputError(self.path, f"holds no run {ref!r} (kernelscope runs {self.path} lists them)")
        raise BadInputError(self.path, f"has several runs that {ref!r} could mean: {', '.join(matches)}")

    def run(self, ref: str) -> Run:
        """The archived run as a Run whose tables are those of the run it was archived from, exactly."""
        run_id = self.resolve(ref)
        con = new_connection()
        try:
            con.execute(sql_text("scope_names.sql"))  # the macros a run's own SQL reads (unmodeled.sql's device pids)
            parts, prefixes = load_run_tables(con, self.root, run_id)
        except BaseException as exc:
            con.close()
            if isinstance(exc, duckdb.Error):  # its files missing, not Parquet, or not of the archive's columns
                raise self._damaged(exc) from None
            raise
        return Run.from_tables(con, self.path / "runs" / f"run_id={run_id}", parts, *prefixes)

    def __repr__(self) -> str:
        """``Archive('runs/archive', runs=12)``: the path given and its committed runs, counted by one listing."""
        if self._unmade:
            return f"{type(self).__name__}({os.fspath(self.path)!r}, not made yet)"
        runs = sum(1 for name in _names(self.root / "runs") if _RUN.fullmatch(name))
        return f"{type(self).__name__}({os.fspath(self.path)!r}, runs={runs})"

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_archive(path: str | os.PathLike) -> Archive:
    """The archive at ``path`` as an Archive: ``.runs()`` lists its runs, ``.sql(query)`` queries across them,
    ``.run(id)`` gives one back as a Run. A folder that is not an archive, or none, is a BadInputError."""
    return Archive(path)


def archive_runs(
    sources: list[str | os.PathLike],
    to: str | os.PathLike,
    *,
    module_prefix: str | None = None,
    function_prefix: str | None = None,
) -> list[tuple[str, bool]]:
    """Add every run at ``sources`` to the archive at ``to`` (created when missing): ``[(run_id, added)]``."""
    archive = Archive(to, create="on add")
    return [archive.add(s, module_prefix=module_prefix, function_prefix=function_prefix) for s in sources]


def _samples_with_arguments(run: Run, rank: int) -> pd.DataFrame:
    """The rank's ``samples`` rows with their arguments as the sample store's JSON (``args``, ``kwargs``)."""
    frame = run.con.execute(f"SELECT * EXCLUDE (rank) FROM samples WHERE rank = {int(rank)} ORDER BY rowid").df()
    encoded = [
        (orjson.dumps(encode(args)).decode(), orjson.dumps(encode(kwargs)).decode())
        for entries in run.function_data(rank).values()
        for _calls, (args, kwargs) in entries
    ]
    frame["args"] = [a for a, _ in encoded]
    frame["kwargs"] = [k for _, k in encoded]
    return frame


def _part_key(part: Part) -> tuple[str, int]:
    return part.run_id, part.rank


def _check_values(check: LaunchCheck) -> tuple[int, ...]:
    return tuple(getattr(check, name) for name in LaunchCheck.__dataclass_fields__)
