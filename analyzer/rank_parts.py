"""Each rank of a run ingested and attributed in DuckDB (``ingest_ranks``), and what a run keeps of it besides its
rows (``RankPart``): its manifest, its decoded samples, its profiler losses (``LaunchCheck``)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from pathlib import Path

import duckdb

from . import rundir
from .errors import BadInputError
from .held import hold_spans
from .ingest import beyond_the_limits, ingest_trace
from .memory import Settings
from .pasted import pasted_events, pasted_processes, take_process
from .ranks import header_rank
from .rundir import COMPILED_REGION_CALL, GRAPH_REPLAY_CALL, OTHER_OPERATOR_CALL
from .samples import function_data_from_store
from .sql import define_scope_names, holds_drops, run_sql_file
from .trace_header import DEVICE_WORK as HOLDS_DEVICE_WORK
from .trace_header import OTHER_RUNTIME, PERCENT_NAME, PYTHON_FRAMES, TraceHeader
from .validate import nothing_to_attribute, pair_spans, validate_escapes, validate_events

# attribution.sql's guards of its launch steps, answered with frames_needed.sql's device_work instead of asked
DEVICE_WORK = "coalesce(getvariable('ks_device_work'), true)"
# the guards of the steps after the launch check, in attribution.sql (device events without a launch or not placed where
# Kineto files them; CPU rows) and attribution_rows.sql (CPU rows' self time), whose answers a trace without device work
# knows: its check is zeros
LOST_LAUNCHES = "getvariable('ks_launch_check').device_events_without_launch > 0"
CPU_ROWS = "getvariable('ks_launch_check').device_events = 0"
UNPLACED = "getvariable('ks_launch_check').unplaced > 0"
# the guard of attribution.sql's step for launches of two runtimes sharing a correlation, false where the native
# reader saw only CUDA's (trace_header.OTHER_RUNTIME): a SELECT of ~0.4 ms of a small CUDA trace's load otherwise
TWO_RUNTIMES = "(SELECT min(family) <> max(family) FROM ks_launches)"


@dataclass(frozen=True)
class LaunchCheck:
    """Launches without their device event and device events without their launch: profiler losses."""

    launches: int
    device_events: int
    launches_without_device_event: int
    device_events_without_launch: int

    @property
    def ok(self) -> bool:
        return not (self.launches_without_device_event or self.device_events_without_launch)

    def losses(self) -> str:
        """What is missing, in words, where not ``ok``: a trace with no launch at all (a tool that writes device
        events alone, or a profiler that lost every runtime call) says so, not that a count of them was lost; one
        whose device events reach calls the check does not count as kernel launches (IBM Spyre's
        aiuLaunchControlBlocks) has launches, of which some were lost."""
        if self.launches == 0 and self.device_events_without_launch == self.device_events:
            events = "event is" if self.device_events_without_launch == 1 else "events are"
            return (
                f"the trace holds no kernel launches (the profiler lost them, or the tool that wrote it keeps none): "
                f"its {self.device_events_without_launch:,} device {events} in no call or module"
            )
        return (
            f"the profiler lost events: {self.launches_without_device_event:,} launches without device event, "
            f"{self.device_events_without_launch:,} device events without launch"
        )


@dataclass(frozen=True)
class RankPart:
    """What a run keeps of each rank besides its rows: manifest, decoded samples, profiler losses."""

    rank: int
    manifest: dict | None
    function_data: dict
    check: LaunchCheck
    directory: Path | None = None  # the rank's run directory (None for a bare trace or an archive)
    header: TraceHeader | None = None  # the trace's keys other than traceEvents (None in an archive)


def ingest_ranks(
    con,
    sources,
    module_prefix: str,
    function_prefix: str,
    progress: bool,
    refuse_empty: bool,
    small: bool = False,
    settings: Settings | None = None,
) -> list[RankPart]:
    """Each rank: ingest, attribution, loss check; its rows then join the others' with their rank. A single
    trace with nothing to attribute is refused before the attribution runs (``refuse_empty``). ``small``: the run's
    JSON is small (run_settings.keeps_steps): its steps' rows may be copied (held.py). ``settings``: ``con``'s, where
    the caller knows them (memory.settings_as_set), else read."""
    parts, aside = [], set()
    for source in sources:
        named, script_paths = calls_named_from_the_trace(source.manifest), rundir.torchscript_paths(source.manifest)
        escaped = rundir.names_escaped(source.manifest)
        define_scope_names(con, module_prefix, function_prefix, *named, names_escaped=escaped, macros=False,
                           torchscript_paths=script_paths)  # fmt: skip
        try:
            # with the rank a run directory names; a bare trace's, its header's, is known once it is read
            header = ingest_trace(con, source.trace, progress=progress, rank=source.rank or 0, settings=settings)
        except PermissionError as exc:  # other OSErrors are not about the input (a full scratch disk)
            raise BadInputError(source.trace, f"cannot be read ({exc.strerror or exc})") from None
        # spans paired from "B" and "E" events, and an Ascend trace's tasks, were not yet device events when the
        # native reader checked the rows; libkineto (which writes schemaVersion) gives every device event a category
        npu_tasks = "schemaVersion" not in header.keys and run_sql_file(con, "npu_tasks.sql").fetchone()[0]
        if pair_spans(con, source.trace, rows_checked=header.all_rows_checked) or npu_tasks:
            validate_events(con, source.trace)
        else:
            validate_events(con, source.trace, rows_checked=header.all_rows_checked, repeats=header.repeats)
        # what the native reader tells of the events as read (an Ascend trace's tasks have just become device events)
        facts = header.facts if not npu_tasks else None
        if escaped and (facts is None or facts & PERCENT_NAME):  # a name without '%' holds no escape
            validate_escapes(con, source.trace)
        if refuse_empty and len(sources) == 1 and not run_sql_file(con, "attributable.sql").fetchone()[0]:
            raise BadInputError(source.trace, nothing_to_attribute(con))
        rank = source.rank if source.rank is not None else header_rank(header.keys, source.trace)
        if rank != header.rank:
            run_sql_file(con, "events_rank.sql", rank=str(rank))
        # a recording's trace is its one process's; a bare trace may hold several ranks' pasted into one file
        processes = pasted_processes(con, source.trace, rank) if source.manifest is None else 0
        for process in range(max(processes, 1)):  # a pasted file's processes, each a rank of its own
            if processes:
                take_process(con, process)
            check, named = _attribute(con, source.trace, script_paths, small, None if processes else facts)
            directory = source.trace.parent if source.manifest is not None else None
            function_data = function_data_from_store(source.store, source.samples)
            if source.samples is not None:
                _check_sample_ids(named, source.trace, source.samples, function_data)
            if processes:  # a copy of the file's events, which pasted_events gives back once all are attributed
                con.execute("DROP TABLE events")
            if len(sources) > 1 or processes:  # one trace of one process keeps its tables where they are
                _set_aside(con, ("kernels",) if processes else ("events", "kernels"), aside)
            parts.append(RankPart(rank + process, source.manifest, function_data, check, directory, header))
        if processes:
            pasted_events(con)
            _set_aside(con, ("events",), aside)
    for table in sorted(aside):
        con.execute(f"ALTER TABLE ks_all_{table} RENAME TO {table}")
    return parts


# The connections on which ks_frame_scopes and ks_scope_names stand as frame_scopes.sql makes them: a small run's,
# kept for the next run (connection.py) with its drops held back, where frames.sql did not replace them; making them
# again cost a small trace's load ~0.6 ms.
_plain_frame_scopes: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()


def _attribute(
    con: duckdb.DuckDBPyConnection, trace: Path, script_paths, small: bool, facts: int | None
) -> tuple[LaunchCheck, list]:
    """Table ``kernels`` of the events in table ``events`` (one rank's), their launch check and the (function_name,
    sample_id) pairs its rows name (each once, in no order). ``facts``: what the native reader found in them
    (trace_header.py), None where it did not read them all as they are."""
    if con not in _plain_frame_scopes:
        run_sql_file(con, "frame_scopes.sql")
    _plain_frame_scopes.discard(con)  # until this attribution has ended without frames.sql
    if facts is not None and not facts & PYTHON_FRAMES:  # no Python frame: no frames to find, and no query to ask
        frames_needed, device_work = False, bool(facts & HOLDS_DEVICE_WORK)
    else:
        frames_needed, device_work = run_sql_file(con, "frames_needed.sql").fetchone()
    if frames_needed:  # a plain trace's Python frames as its scopes
        run_sql_file(con, "frame_names.sql")
        run_sql_file(con, "frames.sql")
    try:
        known = {DEVICE_WORK: device_work, f"NOT {DEVICE_WORK}": not device_work}
        if not device_work:
            known.update({CPU_ROWS: True, LOST_LAUNCHES: False, UNPLACED: False})
        elif facts is not None and not facts & OTHER_RUNTIME:  # every launch is CUDA's: one runtime numbers them
            known[TWO_RUNTIMES] = False
        # the launch check's guards asked there (or known) are answered for attribution_rows.sql: held.py's step
        # sets no variable they read
        settled = {} if device_work else {CPU_ROWS: True}
        run_sql_file(con, "attribution.sql", known=known, answered=settled)
        hold_spans(con, small=small)
        rows = run_sql_file(con, "attribution_rows.sql", known={**known, **settled})
        *counts, named = rows.fetchone()
        # without device work attribution.sql sets no check (its counts here are an earlier run's, or NULL): zeros
        check = LaunchCheck(*counts) if device_work else LaunchCheck(0, 0, 0, 0)
        if script_paths:
            run_sql_file(con, "torchscript_modules.sql")
        run_sql_file(con, "attribution_end.sql")
        if holds_drops(con) and not frames_needed:  # the DROPs of frame_scopes.sql's two held back: they stand
            _plain_frame_scopes.add(con)
    except duckdb.OutOfMemoryException as exc:
        raise BadInputError(trace, beyond_the_limits(con, exc)) from None
    return check, named or []


def _set_aside(con: duckdb.DuckDBPyConnection, tables: tuple[str, ...], aside: set[str]) -> None:
    """One rank's ``tables`` (``events``, ``kernels``) joined to those of the ranks before it (ks_all_events,
    ks_all_kernels), each row with its rank column; ``aside`` holds the tables set aside so far. ingest_ranks names
    them back once every rank is in."""
    for table in tables:
        if table not in aside:
            con.execute(f"ALTER TABLE {table} RENAME TO ks_all_{table}")
            aside.add(table)
        else:
            con.execute(f"INSERT INTO ks_all_{table} SELECT * FROM {table}")
            con.execute(f"DROP TABLE {table}")


def _check_sample_ids(named: list, trace: Path, samples_path: Path, function_data: dict) -> None:
    """Every sample id that a scope of the trace names (``named``: (function_name, sample_id) pairs, _attribute's)
    must be in samples.json (the same recording); the first that is not, in their order, is named."""
    for name, sample_id in sorted(named):
        if not 0 <= sample_id < len(function_data.get(name, ())):
            problem = f"names sample {sample_id} of {name!r}, which {samples_path.name} does not hold"
            raise BadInputError(trace, problem + " (files of two runs?)")


def calls_named_from_the_trace(manifest: dict | None) -> tuple[str | None, str | None, str | None]:
    """The call names a recording gives the kernels that no call scope holds: of CUDA graph launches, of compiled
    regions, and of other operators (the trace rule, docs/sql.md): ``(graph_replay_call, compiled_region_call,
    other_operator_call)``. A ``calls="all"`` recording of format 3 names the first two in its manifest's annotation
    (``calls="functional"`` names none, keeping aitune's view) and gets the trace rule; a bare trace, which has no
    call scopes, gets all three; older recordings (a scope named replays) none."""
    if manifest is None:
        return GRAPH_REPLAY_CALL, COMPILED_REGION_CALL, OTHER_OPERATOR_CALL
    annotation = manifest.get("annotation", {})
    other = OTHER_OPERATOR_CALL if "graph_replay_call" in annotation else None
    return annotation.get("graph_replay_call"), annotation.get("compiled_region_call"), other
