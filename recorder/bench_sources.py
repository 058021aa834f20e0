"""What ``bench`` replays: the samples of a run directory (samples.pt, read by the analyzer with
``torch.load(weights_only=True)``), of a loaded Run, of a live profiler, or a ``function_data`` dict."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from kernelscope.analyzer import Run, load_run
from kernelscope.analyzer.archive import is_archive
from kernelscope.analyzer.errors import BadInputError, KernelscopeError
from kernelscope.analyzer.ranks import UnknownRank
from kernelscope.analyzer.sample_tensors import size_text, why_not_saved
from kernelscope.analyzer.samples import TensorMeta

from .replay import metadata_of
from .run_writer import TEMPORARY_RUN_TENSORS

KEEP_TENSORS_HINT = "ModuleFunctionKernelProfiler(sample_tensor_limit_mb=None)"


@dataclass
class Samples:
    """Per function, ``[(calls, stored (args, kwargs), meta (args, kwargs)), ...]`` in sample-id order; where
    they were recorded (``recorded_type``: ``cuda`` or ``cpu``; ``recorded_on``: with the GPU's name, None when
    unknown), the run whose trace holds their recorded times (None for a bare ``function_data``), and why a
    sample without tensors was not kept."""

    entries: dict[str, list[tuple[int, tuple, tuple]]]
    recorded_type: str
    recorded_on: str | None
    run: Run | None
    rank: int
    where: str
    not_kept: str


@contextmanager
def open_samples(source: Any, rank: int | None = None) -> Iterator[Samples]:
    """The samples of ``source``: a run directory path, a ``Run``, a ``ModuleFunctionKernelProfiler`` that has
    recorded, or a ``function_data`` dict. A run directory loaded here is closed afterwards."""
    if isinstance(source, (str, os.PathLike)):
        if is_archive(source):  # its tables are the run's, its samples.pt is not kept
            raise BadInputError(
                source,
                "is an archive, which keeps no sample tensors to replay: bench the run directory it was archived from",
            )
        with load_run(source) as run:
            yield _run_samples(run, rank, str(source))
        return
    if isinstance(source, Run):
        yield _run_samples(source, rank, str(source.path))
        return
    if hasattr(source, "book") and hasattr(source, "run"):  # a ModuleFunctionKernelProfiler
        if source.run is None:
            raise ValueError("the profiler holds no recording: call profile() first")
        # profile() without out= records into a scratch folder of its own, a path the user never gave
        where = "the profiler's recording" if getattr(source, "_scratch", None) else str(source.run.path)
        not_kept = _memory_cap(source.sample_memory_limit_mb)
        yield _live_samples(source.book.function_data(), source.run, not_kept, where)
        return
    if isinstance(source, dict):
        yield _live_samples(source, None, "the recorder did not keep its inputs (sample_memory_limit_mb)")
        return
    raise TypeError(f"bench() takes a run directory, a Run, a profiler or function_data, not {type(source).__name__}")


def _run_samples(run: Run, rank: int | None, where: str) -> Samples:
    if rank is None:
        if len(run.ranks) > 1:
            raise ValueError(f"{where} has ranks {', '.join(map(str, run.ranks))}: pass rank= (--rank) to bench one")
        rank = run.ranks[0]
    elif rank not in run.ranks:
        raise UnknownRank(where, rank, run.ranks)
    part = run.parts[rank]
    if part.directory is None:
        problem = "is a bare trace or an archived run, not a run directory: it has no samples to replay"
        raise BadInputError(where, problem)
    manifest = part.manifest
    if manifest["files"].get("sample_tensors") is None:
        saved = manifest.get("sample_tensors") or {}
        if saved.get("reason") == TEMPORARY_RUN_TENSORS:
            raise KernelscopeError(
                part.directory,
                f"holds no sample tensors to replay (samples.pt was not saved: {TEMPORARY_RUN_TENSORS}); bench the "
                "profiler itself, or record with profile(..., out=DIR) to keep them in the run directory",
            )
        held = saved.get("bytes")
        size = f", or a limit above the {size_text(held)} they hold," if type(held) is int else ""
        why = why_not_saved(saved) or "no reason given"
        raise KernelscopeError(
            part.directory,
            f"holds no sample tensors to replay (samples.pt was not saved: {why});"
            f" record it with {KEEP_TENSORS_HINT}{size} to keep them",
        )
    stored = run.function_data(rank, tensors=True)
    meta = run.function_data(rank)
    entries = {
        name: [(calls, sample, meta[name][i][1]) for i, (calls, sample) in enumerate(samples)]
        for name, samples in stored.items()
    }
    cap = (manifest.get("sample_memory") or {}).get("limit_bytes")
    return Samples(
        entries,
        manifest.get("device", "cuda"),
        _device_name(manifest.get("device", "cuda"), manifest.get("gpu_name")),
        run,
        rank,
        str(part.directory),
        _memory_cap(None if cap is None else cap / 2**20),
    )


def _live_samples(function_data: dict, run: Run | None, not_kept: str, where: str = "function_data") -> Samples:
    entries = {
        name: [(calls, sample, metadata_of(sample)) for calls, sample in samples]
        for name, samples in function_data.items()
    }
    devices = [layout.device for samples in entries.values() for _, _, meta in samples for layout in _layouts(meta)]
    recorded_type = "cuda" if any(d.startswith("cuda") for d in devices) else "cpu"
    manifest = run.manifest if run is not None else None
    if manifest is not None:
        recorded_type = manifest.get("device", recorded_type)
        recorded_on = _device_name(recorded_type, manifest.get("gpu_name"))
    else:
        recorded_on = None
    return Samples(entries, recorded_type, recorded_on, run, run.ranks[0] if run is not None else 0, where, not_kept)


def _layouts(value: Any) -> Iterator[TensorMeta]:
    if isinstance(value, TensorMeta):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _layouts(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _layouts(item)


def _memory_cap(limit_mb: float | None) -> str:
    cap = "" if limit_mb is None else f"={limit_mb:g}"
    return f"the recorder did not keep its inputs: they would have passed sample_memory_limit_mb{cap}"


def _device_name(device_type: str, gpu_name: str | None) -> str:
    return f"{device_type} ({gpu_name})" if device_type == "cuda" and gpu_name else device_type


def replay_device_name(device: torch.device) -> str:
    """``cuda (<GPU name>)`` or ``cpu``: where a replay runs, comparable with ``Samples.recorded_on``."""
    return _device_name(device.type, torch.cuda.get_device_name(device) if device.type == "cuda" else None)


def recorded_times(samples: Samples, function: str) -> dict[int, tuple[float, float]]:
    """``{sample_id: (recorded µs of all its calls, the pass's µs)}`` from the run's trace ({} without one)."""
    if samples.run is None:
        return {}
    from kernelscope.analyzer.call_times import call_times

    frame = call_times(samples.run, function)
    frame = frame[frame["rank"] == samples.rank]
    return {int(r.sample_id): (float(r.recorded_us), float(r.pass_us)) for r in frame.itertuples(index=False)}
