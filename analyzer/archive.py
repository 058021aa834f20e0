"""An archive of runs: hive-partitioned Parquet that DuckDB, Spark, pyarrow or polars read as it is.

    ARCHIVE/kernelscope-archive.json        marks the folder as an archive (format version)
    ARCHIVE/<table>/run_id=<id>/rank=<rank>/part-0.parquet    for table in events, kernels, samples, runs

A run's id is a hash of the files it was loaded from, so archiving the same run again finds it there and
changes nothing. A run is added through a staging folder; its ``runs`` partition is moved into place
last and marks it complete (an interrupted add leaves no run, and the next add of it starts over).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import duckdb
import orjson
import pandas as pd

from .atomic import write_bytes_atomically
from .errors import BadInputError, KernelscopeError
from .kernel_names import define_kernel_short
from .ranks import find_ranks
from .run import LaunchCheck, RankPart, Run
from .rundir import MANIFEST
from .samples import decode, encode
from .sql import quote, sql_text

MARKER = "kernelscope-archive.json"
ARCHIVE_FORMAT = 1
TABLES = ("events", "kernels", "samples", "runs")  # runs last: it marks a run complete
PART = "part-0.parquet"
HIVE = "hive_partitioning = true, hive_types = {'run_id': VARCHAR, 'rank': INTEGER}"


def is_archive(path: str | os.PathLike) -> bool:
    return (Path(path) / MARKER).is_file()


def run_id_of(path: str | os.PathLike) -> str:
    """``run-`` and 12 hex digits of a SHA-256 over every rank's manifest, sample store and trace bytes."""
    path = Path(path)
    digest = hashlib.sha256()
    for source in find_ranks(path):
        files = [source.trace] if source.manifest is None else [source.trace.parent / MANIFEST]
        files += [] if source.manifest is None else [source.samples, source.trace]
        for file in files:
            digest.update(f"{source.rank}:{file.name}:{file.stat().st_size}:".encode())
            with open(file, "rb") as stream:
                for chunk in iter(lambda s=stream: s.read(1 << 20), b""):
                    digest.update(chunk)
    return "run-" + digest.hexdigest()[:12]


class Archive:
    """An archive folder: add runs, list them, query across them, reproduce one as a Run."""

    def __init__(self, path: str | os.PathLike, *, create: bool = False):
        self.path = Path(path)
        if not is_archive(self.path):
            if not create:
                raise BadInputError(self.path, f"is not a kernelscope archive (no {MARKER})")
            self._create()
        self._con: duckdb.DuckDBPyConnection | None = None

    def _create(self) -> None:
        if self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
            raise KernelscopeError(self.path, f"exists and is not a kernelscope archive (no {MARKER})")
        if not self.path.parent.is_dir():
            raise KernelscopeError(self.path.parent, "is not an existing directory to create the archive in")
        self.path.mkdir(exist_ok=True)
        write_bytes_atomically(self.path / MARKER, orjson.dumps({"kernelscope_archive": ARCHIVE_FORMAT}))

    def run_ids(self) -> list[str]:
        """The ids of the complete runs, sorted."""
        runs = self.path / "runs"
        return sorted(p.name.removeprefix("run_id=") for p in runs.glob("run_id=*")) if runs.is_dir() else []

    def add(
        self, source: str | os.PathLike, *, module_prefix: str | None = None, function_prefix: str | None = None
    ) -> tuple[str, bool]:
        """Archive the run (directory, job directory or trace) at ``source``; ``(run_id, added)``, where
        ``added`` is False when the archive already held it (and nothing was written)."""
        source = Path(source)
        run_id = run_id_of(source)
        if run_id in self.run_ids():
            return run_id, False
        staging_root = self.path / ".staging"
        staging_root.mkdir(exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{run_id}.", dir=staging_root))
        try:
            with Run(source, module_prefix=module_prefix, function_prefix=function_prefix) as run:
                self._stage(run, source, staging, run_id)
            for table in TABLES:
                target = self.path / table / f"run_id={run_id}"
                if target.exists():  # left by an add that was interrupted before its runs partition
                    shutil.rmtree(target)
                target.parent.mkdir(exist_ok=True)
                os.rename(staging / table / f"run_id={run_id}", target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            _remove_if_empty(staging_root)
        self._con = None
        return run_id, True

    def _stage(self, run: Run, source: Path, staging: Path, run_id: str) -> None:
        con = run.con
        archived_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        for rank, part in run.parts.items():

            def target(table: str, rank: int = rank) -> str:
                folder = staging / table / f"run_id={run_id}" / f"rank={rank}"
                folder.mkdir(parents=True)
                return quote(str(folder / PART))

            con.execute(
                f"COPY (SELECT * EXCLUDE (rank) FROM events WHERE rank = {rank} ORDER BY event_id) "
                f"TO {target('events')} (FORMAT parquet)"
            )
            con.execute(
                f"COPY (SELECT * EXCLUDE (rank) FROM kernels WHERE rank = {rank} "
                f"ORDER BY start_us, event_id) TO {target('kernels')} (FORMAT parquet)"
            )
            con.register("ks_samples_out", _samples_with_arguments(run, rank))
            con.execute(
                "COPY (SELECT * REPLACE (CAST(args AS JSON) AS args, CAST(kwargs AS JSON) AS kwargs) "
                f"FROM ks_samples_out) TO {target('samples')} (FORMAT parquet)"
            )
            con.unregister("ks_samples_out")
            variables = {
                "manifest": orjson.dumps(part.manifest).decode(),
                "name": source.name,
                "source": str(source.resolve()),
                "archived_at": archived_at,
                "device": run.device,
                "module_prefix": run.module_prefix,
                "function_prefix": run.function_prefix,
            }
            for key, value in variables.items():
                con.execute(f"SET VARIABLE {key} = {quote(value)}")
            con.execute(f"SET VARIABLE rank = {int(rank)}")
            for key, value in zip(LaunchCheck.__dataclass_fields__, _check_values(part.check), strict=True):
                con.execute(f"SET VARIABLE {key} = {int(value)}")
            con.execute(f"COPY ({sql_text('archive_row.sql')}) TO {target('runs')} (FORMAT parquet)")

    def connect(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB with the views runs, events, kernels, samples over every archived run."""
        if self._con is None:
            if not self.run_ids():
                raise BadInputError(self.path, "holds no runs yet (kernelscope archive RUN --to ARCHIVE adds them)")
            con = duckdb.connect()
            con.execute("SET TimeZone = 'UTC'")  # times print the same on every machine
            for table in TABLES:  # hive partitions read with fixed types, so no engine guesses them
                files = quote(str(self.path / table / "*" / "*" / "*.parquet"))
                columns = "run_id, rank, * EXCLUDE (run_id, rank)"
                con.execute(f"CREATE VIEW {table} AS SELECT {columns} FROM read_parquet({files}, {HIVE})")
            define_kernel_short(con)
            self._con = con
        return self._con

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        return self.connect()

    def sql(self, query: str) -> pd.DataFrame:
        """Any SQL across the archived runs (docs/sql.md, "Archives")."""
        return self.connect().execute(query).df()

    def runs(self) -> pd.DataFrame:
        """One line per archived run, oldest first."""
        if not self.run_ids():
            return pd.DataFrame(columns=["run_id", "name", "start_time", "ranks", "hosts", "kernels", "kernel_us"])
        return self.sql(sql_text("archive_list.sql"))

    def resolve(self, ref: str) -> str:
        """The run id that ``ref`` names: an id, a unique prefix of one, or a unique run name."""
        ids = self.run_ids()
        if ref in ids:
            return ref
        matches = [i for i in ids if i.startswith(ref)] or (
            self.sql(f"SELECT DISTINCT run_id FROM runs WHERE name = {quote(ref)} ORDER BY 1")["run_id"].tolist()
            if ids
            else []
        )
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise BadInputError(self.path, f"holds no run {ref!r} (kernelscope runs {self.path} lists them)")
        raise BadInputError(self.path, f"has several runs that {ref!r} could mean: {', '.join(matches)}")

    def run(self, ref: str) -> Run:
        """The archived run as a Run whose tables are those of the run it was archived from, exactly."""
        run_id = self.resolve(ref)
        con = duckdb.connect()
        try:
            parts, prefixes = self._load_run(con, run_id)
        except BaseException:
            con.close()
            raise
        return Run.from_tables(con, self.path / "runs" / f"run_id={run_id}", parts, *prefixes)

    def _load_run(self, con: duckdb.DuckDBPyConnection, run_id: str) -> tuple[list[RankPart], tuple[str, str]]:
        def files(table: str) -> str:
            return quote(str(self.path / table / f"run_id={run_id}" / "*" / "*.parquet"))

        con.execute(
            f"CREATE TABLE events AS SELECT * EXCLUDE (run_id) FROM read_parquet({files('events')}, {HIVE}) "
            "ORDER BY rank, event_id"
        )
        con.execute(
            f"CREATE TABLE kernels AS SELECT * EXCLUDE (run_id) FROM read_parquet({files('kernels')}, {HIVE}) "
            "ORDER BY rank, start_us, event_id"
        )
        samples = con.execute(
            f"SELECT rank, function_name, calls, CAST(args AS VARCHAR) AS args, CAST(kwargs AS VARCHAR) AS kwargs "
            f"FROM read_parquet({files('samples')}, {HIVE}, file_row_number = true) ORDER BY rank, file_row_number"
        ).fetchall()
        rows = con.execute(
            f"SELECT rank, CAST(manifest AS VARCHAR), module_prefix, function_prefix, "
            f"{', '.join(LaunchCheck.__dataclass_fields__)} FROM read_parquet({files('runs')}, {HIVE}) ORDER BY rank"
        ).fetchall()
        function_data: dict[int, dict] = {row[0]: {} for row in rows}
        for rank, name, calls, args, kwargs in samples:
            function_data[rank].setdefault(name, []).append(
                (calls, (decode(orjson.loads(args)), decode(orjson.loads(kwargs))))
            )
        parts = [
            RankPart(rank, orjson.loads(manifest), function_data[rank], LaunchCheck(*check))
            for rank, manifest, _module_prefix, _function_prefix, *check in rows
        ]
        return parts, (rows[0][2], rows[0][3])

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_archive(path: str | os.PathLike) -> Archive:
    """An existing archive."""
    return Archive(path)


def archive_runs(
    sources: list[str | os.PathLike],
    to: str | os.PathLike,
    *,
    module_prefix: str | None = None,
    function_prefix: str | None = None,
) -> list[tuple[str, bool]]:
    """Add every run at ``sources`` to the archive at ``to`` (created when missing): ``[(run_id, added)]``."""
    archive = Archive(to, create=True)
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


def _check_values(check: LaunchCheck) -> tuple[int, ...]:
    return tuple(getattr(check, name) for name in LaunchCheck.__dataclass_fields__)


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
