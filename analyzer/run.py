"""A loaded run (a run directory or a bare trace) as DuckDB tables, and the API over them."""

from __future__ import annotations

import os
from dataclasses import astuple
from pathlib import Path

import duckdb
import pandas as pd

from . import connection, rundir
from .errors import OUT_OF_MEMORY, BadInputError, KernelscopeError
from .event_array import is_gzip
from .kernel_names import define_kernel_short
from .memory import default_memory_limit, json_bytes, limit_memory, settings_as_set
from .profiling_frame import PROFILING_COLUMNS, profiling_frame
from .rank_parts import LaunchCheck, RankPart, calls_named_from_the_trace, ingest_ranks
from .ranks import UnknownRank, find_ranks, merge_function_data, one_scheme, rank_twice
from .run_settings import keeps_steps, limit_optimizers, limit_threads
from .rundir import FUNCTION_PREFIX, MODULE_PREFIX
from .sample_tensors import load_sample_tensors
from .samples import check_totals, sample_totals_frame, samples_frame
from .sql import drop_held, execute, hold_drops, sql_template, sql_text
from .summary import describe_results, summarize, summary_query
from .trace_header import TraceHeader
from .tree import define_tree_views, module_tree
from .user_queries import query_frame
from .validate import NOTHING_TO_ATTRIBUTE
from .whole_reads import read_whole

BREAKDOWN_COLUMNS = ("op", "module_name", "kernel", "call_op")


class Run:
    """One recording in DuckDB: tables ``events``, ``kernels``, ``samples``, ``summary`` (docs/sql.md).

    The ranks of a ``torch.distributed`` job (a job directory of ``rank-<N>/`` run directories) load as one
    run: every table has a ``rank`` column, ``describe()`` merges them, ``describe(rank=N)`` takes one."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        module_prefix: str | None = None,
        function_prefix: str | None = None,
        progress: bool = False,
        database: str = ":memory:",
        allow_empty: bool = False,
        memory_limit: int | str | None = None,
        disk_limit: int | str | None = None,
    ):
        path = Path(path)
        sources = find_ranks(path)
        if module_prefix is None:
            one_scheme(path, sources, "module_prefix", MODULE_PREFIX)
        if function_prefix is None:
            one_scheme(path, sources, "function_prefix", FUNCTION_PREFIX)
        annotation = (sources[0].manifest or {}).get("annotation", {})
        module_prefix = module_prefix or annotation.get("module_prefix", MODULE_PREFIX)
        function_prefix = function_prefix or annotation.get("function_prefix", FUNCTION_PREFIX)
        con = connection.connect(database, sized=True)
        json_size = sum(json_bytes(s.trace, is_gzip(s.trace)) for s in sources)
        memory = default_memory_limit(json_size) if memory_limit is None else memory_limit
        made, now = connection.made_settings(con), connection.sized_settings(con)  # now: as the last run left them
        limits = limit_memory(con, memory, json_size, disk_limit, now)
        threads = limit_threads(con, json_size, made.threads, now.threads)
        lean, default = made.lean_optimizers, made.disabled_optimizers
        passes = limit_optimizers(con, json_size, lean, now.disabled_optimizers, default)
        now.threads, now.disabled_optimizers = threads, passes  # as set: the give-back of a kept run reads them
        small = keeps_steps(json_size)
        if small:
            hold_drops(con)
        try:
            settings = settings_as_set(con, threads, limits)
            refuse_empty = not allow_empty
            parts = ingest_ranks(con, sources, module_prefix, function_prefix, progress, refuse_empty, small, settings)
            if len(parts) > 1:  # the ranks' samples merged (function_data()) add up too
                check_totals(merge_function_data({part.rank: part.function_data for part in parts}), path)
        except BaseException:
            connection.close(con)
            raise
        self._assemble(con, path, parts, module_prefix, function_prefix)
        self._keeps_connection = small  # for the next run (connection.py): a small run's temporary tables are small
        if not allow_empty and self._counts()[1] == 0:
            connection.close(self._con)
            raise BadInputError(sources[0].trace if len(sources) == 1 else path, NOTHING_TO_ATTRIBUTE)

    @classmethod
    def from_tables(
        cls,
        con: duckdb.DuckDBPyConnection,
        path: str | os.PathLike,
        parts: list[RankPart],
        module_prefix: str,
        function_prefix: str,
    ) -> Run:
        """A run whose ``events`` and ``kernels`` tables (with ``rank``) are already in ``con`` (an archive)."""
        run = cls.__new__(cls)
        run._assemble(con, Path(path), parts, module_prefix, function_prefix)
        return run

    def _assemble(self, con, path: Path, parts: list[RankPart], module_prefix: str, function_prefix: str) -> None:
        if len({part.rank for part in parts}) != len(parts):
            raise BadInputError(path, rank_twice([(part.rank, part.header and part.header.path) for part in parts]))
        self._con, self.path = con, path
        self._views_defined = self._closed = self._keeps_connection = False
        self._counted: tuple[int, int] | None = None  # (device events, rows) of table kernels, counted once
        self.module_prefix, self.function_prefix = module_prefix, function_prefix
        self.parts = {part.rank: part for part in sorted(parts, key=lambda p: p.rank)}
        self.manifest: dict | None = next(iter(self.parts.values())).manifest
        self.graph_replay_call, self.compiled_region_call, self.other_operator_call = calls_named_from_the_trace(
            self.manifest
        )
        self.names_escaped = rundir.names_escaped(self.manifest)

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The run's DuckDB connection, holding every table and view of docs/sql.md. The tables made from the
        samples and the views are defined at its first use, and the step tables a small trace kept dropped: profile()'s
        in-process result reads none of them, and defining them cost more than the attribution of a small trace."""
        if not self._views_defined:
            drop_held(self._con)  # the step tables a small trace kept are not the user's
            self._define_views()
            self._views_defined = True
        return connection.shared(self._con)

    def _define_views(self) -> None:
        frames = [samples_frame(part.function_data).assign(rank=rank) for rank, part in self.parts.items()]
        samples = pd.concat(frames, ignore_index=True).astype({"rank": "int32"})  # noqa: F841 (read by name below)
        sample_totals = sample_totals_frame(self.function_data())  # noqa: F841
        con = self._con
        con.execute("CREATE OR REPLACE TABLE samples AS SELECT * FROM samples")
        con.execute("CREATE OR REPLACE TABLE sample_totals AS SELECT * FROM sample_totals")
        con.execute(f"CREATE OR REPLACE VIEW summary AS {summary_query()}")
        con.execute(f"CREATE OR REPLACE VIEW sample_costs AS {sql_text('sample_costs.sql')}")
        define_tree_views(con)
        define_kernel_short(con)

    @property
    def header(self) -> TraceHeader | None:
        """The first rank's trace header (device properties, base time, distributed info…)."""
        return next(iter(self.parts.values())).header

    @property
    def ranks(self) -> list[int]:
        return list(self.parts)

    @property
    def manifests(self) -> dict[int, dict | None]:
        return {rank: part.manifest for rank, part in self.parts.items()}

    @property
    def device(self) -> str:
        """'cuda' when the trace holds device events, else 'cpu' (CPU operators, by self time, stand in for kernels)."""
        return "cuda" if self._counts()[0] else "cpu"

    def _counts(self) -> tuple[int, int]:
        """(device events, rows) of table ``kernels``, counted at the first need: the table is made once, at load."""
        if self._counted is None:
            query = "SELECT count(*) FILTER (WHERE kind <> 'cpu'), count(*) FROM kernels"
            self._counted = tuple(execute(self._con, query).fetchone())
        return self._counted

    def __repr__(self) -> str:
        """``Run('runs/mlp', ranks=[0], device='cuda', rows=1234)``: what was loaded, in one line; a closed run's rows
        are not counted any more."""
        ranks = self.ranks
        shown = repr(ranks) if len(ranks) <= 4 else f"[{ranks[0]}, {ranks[1]}, …, {ranks[-1]}] ({len(ranks)})"
        fields = [repr(os.fspath(self.path)), f"ranks={shown}"]
        if self._counted is not None or not self._closed:
            fields += [f"device={self.device!r}", f"rows={self._counts()[1]}"]
        return f"{type(self).__name__}({', '.join(fields + ['closed'] * self._closed)})"

    def profiling_df(self, rank: int | None = None, *, top_k: int | None = None) -> pd.DataFrame:
        """One row per device event (module_name, function_name, op, kernel, kernel_us first: docs/sql.md,
        kernels), in device start order, rank by rank; with ``top_k``, only the ``top_k`` longest, longest first."""
        where = "" if rank is None else f"WHERE rank = {self._rank(rank)}"
        order = "rank, start_us, event_id"
        if top_k is not None:
            order = f"kernel_us DESC, {order} LIMIT {_checked_top_k(top_k)}"
        query = f"SELECT {', '.join(PROFILING_COLUMNS)} FROM kernels {where} ORDER BY {order}"
        return profiling_frame(execute(self._con, query).fetchnumpy(), self._thread_names)

    def _thread_names(self, keys: list[int]) -> dict[int, str]:
        """``{key: name}`` of the threads of ``keys`` that the trace names by a string (thread_names.sql)."""
        return dict(execute(self._con, sql_text("thread_names.sql"), {"keys": keys}).fetchall())

    def function_data(self, rank: int | None = None, *, tensors: bool = False) -> dict:
        """``{function: [(calls, (args, kwargs)), ...]}`` with TensorMeta in place of tensors; all ranks merged
        (one entry per distinct signature, calls added up) unless ``rank`` is given.

        ``tensors=True`` reads the stored tensors from samples.pt instead (needs torch; read only with
        ``torch.load(weights_only=True, map_location="cpu")``); a signature whose tensors the recorder did
        not keep stays TensorMeta. A bare trace or a run saved without tensors is bad input; a job of
        several ranks needs ``rank``.
        """
        if tensors:
            if rank is None and len(self.parts) > 1:
                raise ValueError("this run has several ranks: pass rank= to read sample tensors")
            part = self.parts[self._rank(rank) if rank is not None else self.ranks[0]]
            if part.directory is None:
                raise BadInputError(self.path, "is a trace, not a run directory: it has no sample tensors")
            return load_sample_tensors(part.directory, part.manifest, part.function_data)
        if rank is not None:
            return self.parts[self._rank(rank)].function_data
        return merge_function_data({r: part.function_data for r, part in self.parts.items()})

    def describe(self, top_k: int | None = 10, rank: int | None = None) -> pd.DataFrame:
        """describe_results of the whole run (all ranks merged), or of one rank; ``top_k=None``: every function."""
        if rank is None:
            return summarize(self.con, top_k)
        return describe_results(self.profiling_df(rank), self.function_data(rank), top_k)

    def time_by(self, column: str, top_k: int | None = 10, rank: int | None = None) -> pd.DataFrame:
        """Device time grouped by ``op``, ``module_name``, ``kernel`` or ``call_op`` (all ranks, or one): the view
        of a trace that names no call. The count column is ``kernels``, or ``cpu_operators`` where the rows are
        CPU operators (a trace without device events). ``top_k=None``: every group."""
        if column not in BREAKDOWN_COLUMNS:
            raise ValueError(f"column must be one of {BREAKDOWN_COLUMNS}, not {column!r}")
        top_k = 2**62 if top_k is None else _checked_top_k(top_k)
        where = "true" if rank is None else f"rank = {self._rank(rank)}"
        query = sql_template("breakdown.sql").substitute(column=column, top_k=top_k, where=where)
        frame = self.con.execute(query).df()
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
        frame = frame.astype({"kernels": "int64"})
        return frame.rename(columns={"kernels": "cpu_operators"}) if self.device == "cpu" else frame

    def time_by_rank(self, column: str, top_k: int | None = 10) -> pd.DataFrame:
        """time_by of each rank, one after the other, with a leading ``rank`` column."""
        frame = pd.concat(
            [self.time_by(column, top_k, rank).assign(rank=rank) for rank in self.parts], ignore_index=True
        )
        return frame[["rank"] + [c for c in frame.columns if c != "rank"]]

    def tree(self, rank: int | None = None) -> pd.DataFrame:
        """The module tree (view ``module_tree``): per module, its device time with its submodules
        (``inclusive_us``) and its own, parents before children, most expensive first; a job's ranks merged
        (``rank`` NA) unless ``rank`` is given."""
        return module_tree(self, rank)

    def describe_by_rank(self, top_k: int | None = 10) -> pd.DataFrame:
        """describe_results of each rank, one after the other, with a leading ``rank`` column."""
        frames = [self.describe(top_k, rank).assign(rank=rank) for rank in self.parts]
        frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["rank"])
        return frame[["rank"] + [c for c in frame.columns if c != "rank"]]

    def sql(self, query: str) -> pd.DataFrame:
        """Any SQL over the run's tables and views."""
        return query_frame(self.con, query)

    def notes(self) -> list[str]:
        """One sentence per rank whose trace holds device events the attribution does not read (unmodeled.sql:
        MTIA's mtia_insight, a CUPTI range profiler's cuda_profiler_range…): they are in ``events`` only, and
        where the rank has no device event kernelscope reads, its rows are its leaf CPU operators; and one per
        category of operators or annotations written as async slices, which are read as no scope (async_scopes.sql);
        and one per rank whose device events have calls filed at their own start (device_time_calls.sql)."""
        found: dict[int, list[str]] = {}
        for rank, cat, events, dur_us in self.con.execute(sql_text("unmodeled.sql")).fetchall():
            found.setdefault(rank, []).append(f"{events:,} {cat} ({dur_us:,.1f} µs)")
        device_ranks = {
            rank for (rank,) in self.con.execute("SELECT DISTINCT rank FROM kernels WHERE kind <> 'cpu'").fetchall()
        }
        notes = []
        for rank, what in found.items():
            rows = "" if rank in device_ranks else ", whose rows are its leaf CPU operators"
            notes.append(
                f"{self._trace_of(rank)}: holds device events that kernelscope does not attribute: {', '.join(what)}; "
                f"they are in table events, not in kernels{rows}"
            )
        for rank, cat, slices in self.con.execute(sql_text("async_scopes.sql")).fetchall():
            notes.append(
                f'{self._trace_of(rank)}: holds {slices:,} {cat} written as async slices ("ph": "b"), which lie on '
                "tracks of their own, not on a thread's stack: they are read as no scope"
            )
        for rank, at_their_start, device_events in self.con.execute(sql_text("device_time_calls.sql")).fetchall():
            notes.append(
                f"{self._trace_of(rank)}: {at_their_start:,} of its {device_events:,} device events have a runtime call"
                " of their own name that lasts 0 µs and starts when they do (a writer that files each call at its"
                " device event's start, as torch_npu's Kineto export): their operators are those running on the"
                " calling thread then, which may come after the one that launched them"
            )
        notes += self._uncalled_sample_notes()
        return notes + [note for part in self.parts.values() if part.header is not None for note in part.header.notes()]

    def _trace_of(self, rank: int):
        """The trace file of ``rank``, for a note (the run's path where the rank has none: an archive's)."""
        part = self.parts.get(rank)
        return part.header.path if part is not None and part.header is not None else self.path

    def _uncalled_sample_notes(self) -> list[str]:
        """A sentence per rank whose sample store holds functions its trace never calls (uncalled_samples.sql)."""
        found: dict[int, list[str]] = {}
        if any(part.function_data and part.header is not None for part in self.parts.values()):  # not an archive
            for rank, name, calls in self.con.execute(sql_text("uncalled_samples.sql")).fetchall():
                found.setdefault(rank, []).append(f"{name} ({calls:,} call{'s' if calls != 1 else ''})")
        notes = []
        for rank, names in found.items():
            part = self.parts[rank]
            store = part.directory / part.manifest["files"]["samples"] if part.directory is not None else self.path
            notes.append(
                f"{store}: holds samples of {', '.join(names)}, which no call scope of the trace names: they are in"
                " table samples and function_data, in no row of kernels, and describe() leaves them out"
            )
        return notes

    def launch_check(self) -> LaunchCheck:
        """Profiler losses, added up over the ranks (each rank's correlation ids are its own)."""
        checks = [part.check for part in self.parts.values()]
        return LaunchCheck(*(sum(values) for values in zip(*map(astuple, checks), strict=True)))

    def _rank(self, rank: int) -> int:
        if rank not in self.parts:
            raise UnknownRank(self.path, rank, list(self.parts))
        return int(rank)

    def close(self) -> None:
        """Give the run's DuckDB connection back; closing again does nothing, and any later query is one
        KernelscopeError naming the run (not DuckDB's 'Connection already closed')."""
        if self._closed:
            return
        connection.close(self._con, keep=self._keeps_connection)
        self._con, self._closed = _ClosedConnection(self.path), True

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _ClosedConnection:
    """What a closed run queries in place of its connection: every use says the run is closed."""

    def __init__(self, path: Path):
        self.path = path

    def __getattr__(self, name: str):
        raise KernelscopeError(self.path, "is closed (its with block ended, or close() was called); load_run() again")


def _checked_top_k(top_k: int) -> int:
    if top_k < 0:
        raise ValueError("top_k must be >= 0")
    return int(top_k)


def load_run(
    path: str | os.PathLike,
    module_prefix: str | None = None,
    function_prefix: str | None = None,
    *,
    progress: bool = False,
    allow_empty: bool = False,
    memory_limit: int | str | None = None,
    disk_limit: int | str | None = None,
) -> Run:
    """Load a run directory or any Kineto trace (``.json``/``.json.gz``) for analysis.

    A trace with nothing to attribute (no device events, no CPU operators) is refused as bad input
    unless ``allow_empty`` (then the tables are empty). ``memory_limit`` (bytes, or DuckDB's "4GB") caps
    DuckDB's memory, beyond which it spills to a scratch directory; default the size of the traces' JSON. ``disk_limit``
    (likewise) caps that spill; default twice the JSON, at least 4 GiB. A trace that needs more is refused.
    """
    for name, prefix in (("module_prefix", module_prefix), ("function_prefix", function_prefix)):
        if prefix is not None and not prefix:
            raise ValueError(f"{name} must not be empty")
    settings = dict(progress=progress, allow_empty=allow_empty, memory_limit=memory_limit, disk_limit=disk_limit)
    try:
        return read_whole(
            path, lambda: Run(path, module_prefix=module_prefix, function_prefix=function_prefix, **settings), Run.close
        )
    except MemoryError:  # the load's memory, freed on the way here, lets the error be made
        raise BadInputError(path, OUT_OF_MEMORY) from None
