"""The ranks of a recording: one run directory, a bare trace, a job directory holding one run
directory per rank of a ``torch.distributed`` job (``rank-<N>/``, as ``profile()`` writes them), or a directory of
plain traces, one per rank."""

from __future__ import annotations

import datetime
import os
import re
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path

from .atomic import unreadable_link
from .errors import BadInputError
from .rundir import MANIFEST, MAX_RANK, SAMPLES, TRACE, is_rank, json_text, read_manifest
from .samples import read_samples, render_call
from .trace_kind import not_a_trace

EPOCH_TS_NS = 10**18  # ts from which a trace's times read as epoch time (2001-09-09): HTA's traces, the 2021 format

RANK_DIR = "rank-{rank}"
ARCHIVE_MARKER = "kernelscope-archive.json"  # archive.MARKER: an archive's folder is no directory of traces
_RANK_DIR = re.compile(r"rank-([0-9]+)")  # ASCII digits only: \d also takes those of other scripts (rank-١)


class UnknownRank(ValueError):
    """A rank asked for (``rank=``, ``--rank``) that the run does not hold; every command words it alike."""

    def __init__(self, where: object, rank: int, ranks: list[int]):
        super().__init__(f"{where} has no rank {rank} (its ranks: {', '.join(map(str, ranks))})")


@dataclass(frozen=True)
class RankSource:
    """Where one rank's recording lies; ``rank`` is None for a bare trace (its header may say)."""

    rank: int | None
    trace: Path
    manifest: dict | None
    store: dict
    samples: Path | None  # the sample store the manifest names (None for a bare trace)


def rank_directories(path: Path) -> dict[int, Path]:
    """``{rank: run directory}`` of a job directory (empty when ``path`` is not one)."""
    found: dict[int, Path] = {}
    if path.is_dir():
        for child in sorted(path.iterdir()):
            match = _RANK_DIR.fullmatch(child.name)
            if not (match and child.is_dir() and (child / MANIFEST).exists()):  # read_manifest says what one is not
                continue
            rank = int(match.group(1))
            if rank > MAX_RANK:
                raise BadInputError(child, f"is named for rank {rank}, not a rank from 0 to {MAX_RANK}")
            if rank in found:
                raise BadInputError(path, f"holds rank {rank} twice ({found[rank].name} and {child.name})")
            found[rank] = child
    return dict(sorted(found.items()))


def is_rank_directory_name(name: str) -> bool:
    return _RANK_DIR.fullmatch(name) is not None


def is_job_directory(path: Path) -> bool:
    return path.is_dir() and not (path / MANIFEST).exists() and bool(rank_directories(path))


def find_ranks(path: Path, notice: bool = True) -> list[RankSource]:
    """The recordings at ``path``, in rank order, checked to belong together. In a directory of plain traces, the
    JSON files that are no traces are left out, with a RuntimeWarning naming them (``notice``)."""
    if path.is_dir():
        if (path / ARCHIVE_MARKER).is_file():
            raise BadInputError(path, "is an archive, not a run: Archive(path).run(ID) opens one of its runs")
        if is_job_directory(path):
            return _job(path)
        runs = runs_inside(path)
        if runs and not plain_traces(path):
            listed = ", ".join(runs[:5]) + (f", … ({len(runs)} in all)" if len(runs) > 5 else "")
            raise BadInputError(path, f"is a folder of run directories ({listed}), not a run: give one of them")
        traces = plain_traces(path) or nested_traces(path)
        if traces:
            traces = _traces_of(path, traces, notice)
            return [RankSource(None, _readable_trace(trace), None, {}, None) for trace in traces]
        return [_run_directory(path, None)]
    if path.exists():
        return [RankSource(None, _readable_trace(path), None, {}, None)]
    if problem := unreadable_link(path):  # a link that loops is there, not missing
        raise BadInputError(path, problem)
    if str(path) == "-":  # `zcat t.json.gz | kernelscope analyze -`: the trace is read in parts, by its offsets
        raise BadInputError(path, "no such run directory or trace file; a trace is read from a file, not from stdin")
    raise BadInputError(path, "no such run directory or trace file")


def plain_traces(path: Path) -> list[Path]:
    """The trace files (``*.json``, ``*.json.gz``) of a directory of plain traces, as HolisticTraceAnalysis reads a
    job's ranks (each rank's from its ``distributedInfo``); none for a run directory (even one missing its manifest)
    or an archive."""
    if any(os.path.lexists(path / name) for name in (MANIFEST, TRACE, SAMPLES, ARCHIVE_MARKER)):
        return []
    return sorted(child for child in path.iterdir() if child.name.endswith((".json", ".json.gz")) and child.is_file())


def runs_inside(path: Path) -> list[str]:
    """The names of the run directories (not ``rank-N``) that a directory which is no run itself holds: a user's
    folder of runs, given where one of them was meant."""
    if any(os.path.lexists(path / name) for name in (MANIFEST, TRACE, SAMPLES, ARCHIVE_MARKER)):
        return []
    return [child.name for child in sorted(path.iterdir()) if child.is_dir() and (child / MANIFEST).is_file()]


def nested_traces(path: Path) -> list[Path]:
    """The trace files one directory down, where ``path`` holds none itself and is no run directory: a job that
    wrote each rank's traces into a directory of its own (rank0/, rank1/…), read as if they were side by side."""
    if any(os.path.lexists(path / name) for name in (MANIFEST, TRACE, SAMPLES, ARCHIVE_MARKER)):
        return []
    return [trace for child in sorted(path.iterdir()) if child.is_dir() for trace in plain_traces(child)]


def _traces_of(path: Path, files: list[Path], notice: bool) -> list[Path]:
    """The traces among the JSON ``files`` of a directory of plain traces: those that are JSON of another kind
    (trace_kind.py) are left out, and a directory that holds no trace is refused."""
    kinds = {file: not_a_trace(file) for file in files}
    others = [f"{file.name} ({kind})" for file, kind in kinds.items() if kind is not None]
    traces = [file for file, kind in kinds.items() if kind is None]
    listed = ", ".join(others[:10]) + (f", … ({len(others)} in all)" if len(others) > 10 else "")
    if not traces:
        raise BadInputError(path, f"holds no Kineto trace, only JSON of other kinds: {listed}")
    if others and notice:
        warnings.warn(f"{path}: leaves out the JSON files that are not Kineto traces: {listed}", RuntimeWarning, 4)
    return traces


def _readable_trace(path: Path) -> Path:
    """``path``, a non-empty regular file: a FIFO would block the reader, a device or /proc/self/mem (size 0,
    unreadable) would fail it without naming the file."""
    try:
        info = path.stat()
    except OSError as exc:
        raise BadInputError(path, f"cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise BadInputError(path, "is not a regular file (a device, FIFO or socket is not read as a trace)")
    if info.st_size == 0:
        raise BadInputError(path, "the file is empty")
    return path


def _run_directory(path: Path, expected_rank: int | None) -> RankSource:
    manifest = read_manifest(path)
    rank = manifest.get("rank", 0)
    if not isinstance(rank, int):
        raise BadInputError(path / MANIFEST, f"has a rank that is not an integer ({rank!r})")
    if expected_rank is not None and rank != expected_rank:
        raise BadInputError(path, f"holds the run of rank {rank}, not of rank {expected_rank} as its name says")
    trace, samples = _readable_trace(path / manifest["files"]["trace"]), path / manifest["files"]["samples"]
    return RankSource(rank, trace, manifest, read_samples(samples), samples)


def _job(path: Path) -> list[RankSource]:
    sources = [_run_directory(directory, rank) for rank, directory in rank_directories(path).items()]
    sizes = sorted({s.manifest.get("world_size") for s in sources}, key=str)
    if len(sizes) > 1:
        raise BadInputError(path, f"holds ranks of different jobs (world sizes {', '.join(map(str, sizes))})")
    world_size = sizes[0]
    if world_size is not None and len(sources) < world_size:  # every rank is below world_size (read_manifest)
        recorded = {s.rank for s in sources}
        missing = [rank for rank in range(min(world_size, len(sources) + 10)) if rank not in recorded][:10]
        count = world_size - len(sources)
        listed = ", ".join(map(str, missing)) + (f", … ({count} in all)" if count > len(missing) else "")
        warnings.warn(
            f"{path}: ranks {listed} of {world_size} were not recorded; the run holds the others",
            RuntimeWarning,
            stacklevel=4,
        )
    return sources


def one_scheme(path: Path, sources: list[RankSource], key: str, default: str) -> None:
    """The ranks of a job name their scopes with one annotation ``key`` (module_prefix, function_prefix; ``default``
    where a manifest names none): a run's scopes are parsed with one of each."""
    named = [(source.manifest or {}).get("annotation", {}).get(key, default) for source in sources]
    if len(set(named)) > 1:
        other = next(name for name in named if name != named[0])
        schemes = f"annotation.{key} {json_text(named[0])} and {json_text(other)}"
        raise BadInputError(path, f"holds ranks of different annotation schemes ({schemes})")


def header_rank(keys: dict, trace: Path) -> int:
    """The rank a bare Kineto trace names in its ``distributedInfo`` (0 when it names none)."""
    info = keys.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    if rank is not None and not is_rank(rank):
        raise BadInputError(trace, f"has distributedInfo.rank {json_text(rank)}, not an integer from 0 to {MAX_RANK}")
    return rank or 0


# tensorboard_trace_handler names a cycle's trace so: the worker, a timestamp, .pt.trace.json[.gz]
_CYCLE = re.compile(r"(?P<worker>.+)\.\d+\.pt\.trace\.json(\.gz)?$")


def rank_twice(ranks: list[tuple[int, str | None]]) -> str:
    """Why the traces of a directory of plain traces, ``[(rank, trace path)]``, are not one job: two name one rank."""
    seen: dict[int, str | None] = {}
    for rank, trace in ranks:
        if rank in seen:
            if trace is None or seen[rank] is None:
                return f"holds rank {rank} twice"
            first, second = _shown(Path(seen[rank]), Path(trace))
            worker = _CYCLE.match(first)
            if worker and (other := _CYCLE.match(second)) and other["worker"] == worker["worker"]:
                return (
                    f"holds rank {rank} twice ({first} and {second}: two profiling cycles of worker"
                    f" {worker['worker']!r}, as tensorboard_trace_handler names them): load each trace on its own"
                )
            return (
                f"holds rank {rank} twice ({first} and {second}, by their"
                " distributedInfo.rank, 0 where a trace names none): a folder of traces is one job, one trace"
                " per rank; traces of separate runs load each on its own"
            )
        seen[rank] = trace
    raise ValueError("no rank is held twice")


def _shown(first: Path, second: Path) -> tuple[str, str]:
    """Two traces' names as a message shows them: with their directories where those differ (nested_traces)."""
    if first.parent == second.parent:
        return first.name, second.name
    return f"{first.parent.name}/{first.name}", f"{second.parent.name}/{second.name}"


def header_gpu_names(keys: dict) -> list[str]:
    """The names of the GPUs a bare Kineto trace's ``deviceProperties`` lists, in its order: only names that are
    strings, of entries that are objects, of a list (a hostile header may hold anything there)."""
    properties = keys.get("deviceProperties")
    if not isinstance(properties, list):
        return []
    return [device["name"] for device in properties if isinstance(device, dict) and isinstance(device.get("name"), str)]


def trace_start(con, keys: dict, rank: int) -> str | None:
    """When a bare trace's rank ``rank`` was recorded (UTC, ISO 8601 to the second). Kineto writes each event's ts
    in µs after ``baseTimeNanoseconds``, a base it sets once per process, weeks before a trace (2026-10-01 for the
    H200 host's traces of 2026-11-30): the start is the base plus the first event's ts. A trace of epoch ts (no
    base: HolisticTraceAnalysis's, the 2021 format's) starts at its first ts."""
    first = con.execute(f"SELECT min(ts_ns) FROM events WHERE rank = {int(rank)} AND ph = 'X'").fetchone()[0]
    base = keys.get("baseTimeNanoseconds")
    if first is None:
        return None
    if isinstance(base, int) and not isinstance(base, bool) and base > 0:
        first += base
    elif first < EPOCH_TS_NS:  # relative ts with no base to add them to
        return None
    return datetime.datetime.fromtimestamp(first / 1e9, datetime.timezone.utc).isoformat(timespec="seconds")


def merge_function_data(by_rank: dict[int, dict]) -> dict:
    """One ``function_data`` for several ranks: a signature seen on several ranks is one entry whose calls
    add up; entries keep first-seen order, rank by rank. One rank's is returned as it is."""
    if len(by_rank) == 1:
        return next(iter(by_rank.values()))
    merged: dict[str, list] = {}
    positions: dict[tuple[str, str], int] = {}
    for function_data in by_rank.values():
        for name, entries in function_data.items():
            target = merged.setdefault(name, [])
            for calls, sample in entries:
                key = (name, render_call(sample))
                if key in positions:
                    old_calls, old_sample = target[positions[key]]
                    target[positions[key]] = (old_calls + calls, old_sample)
                else:
                    positions[key] = len(target)
                    target.append((calls, sample))
    return merged
