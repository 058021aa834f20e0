"""Write a run directory (docs/format.md) atomically: everything goes to a hidden sibling staging
directory, which is renamed into place only when complete. An existing run is never replaced unless
``overwrite`` is asked for."""

from __future__ import annotations

import datetime as _dt
import errno
import os
import platform
import shutil
import socket
import stat
import sys
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Any

import orjson
import torch
from kernelscope.analyzer.atomic import errors_naming, make_temp_dir, publish
from kernelscope.analyzer.errors import KernelscopeError, RunExistsError
from kernelscope.analyzer.ranks import RANK_DIR, is_job_directory
from kernelscope.analyzer.rundir import (
    COMPILED_REGION_CALL,
    FORMAT_VERSION,
    FUNCTION_PREFIX,
    GRAPH_REPLAY_CALL,
    MANIFEST,
    MAX_NESTING,
    MODULE_PREFIX,
    MODULE_SEPARATOR,
    NAME_ESCAPE,
    SAMPLE_SEPARATOR,
    SAMPLE_TENSORS,
    SAMPLES,
    TRACE,
    nested_deeper_than,
)
from kernelscope.analyzer.sample_tensors import why_not_saved
from kernelscope.analyzer.samples import SAMPLES_FORMAT, tensor_bytes

from .retention import CappedSampleBook
from .torch_files import save_samples
from .trace_export import export_trace, gzip_file

# why a temporary run's manifest says its sample tensors were not saved (bench_sources.py reads it to say what to do)
TEMPORARY_RUN_TENSORS = "a temporary run (profile() without out=) leaves them in function_data, live"


def distributed_coordinates() -> tuple[int, int, str | None]:
    """(rank, world size, backend) of the torch.distributed job this process is in; (0, 1, None) outside one."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        dist = torch.distributed
        return dist.get_rank(), dist.get_world_size(), str(dist.get_backend())
    return 0, 1, None


def run_destination(out: Path) -> Path:
    """Where this process's run goes: ``out`` itself, or in a job of several ranks ``out/rank-<rank>``, so that
    every rank can be given the same ``out`` (the job's directory, loaded as one run by the analyzer)."""
    rank, world_size, _backend = distributed_coordinates()
    return out / RANK_DIR.format(rank=rank) if world_size > 1 else out


def check_destination(out: Path, overwrite: bool) -> None:
    """Fail before any work when the run would replace something or has nowhere to go. Missing folders above
    ``out`` are fine: write_run creates them."""
    try:  # torch.profiler's export takes only a path that is text (a str of UTF-8): the trace could not be written
        os.fspath(out.absolute()).encode("utf-8")
    except UnicodeEncodeError:
        raise KernelscopeError(
            out, "is a path that is not UTF-8 text, where torch.profiler cannot write its trace"
        ) from None
    if os.path.lexists(out):  # a link that leads nowhere too: the rename would fail once the model has run
        _check_replaceable(out)  # what is no run: overwrite=True would not replace it either, so that is the fault
        if not overwrite:
            raise RunExistsError(
                out, "already exists; choose another path, or replace it with overwrite=True (CLI: --force)"
            )
    existing = _nearest_existing(out.parent)
    if not existing.is_dir():
        raise KernelscopeError(existing, "is not a directory to write the run into")
    try:  # a real probe: os.access says yes to root even on a read-only file system
        os.rmdir(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".probe", dir=existing))
    except OSError as exc:
        raise KernelscopeError(existing, f"is not writable ({exc.strerror or exc})") from None


def _check_replaceable(out: Path) -> None:
    """What overwrite=True may replace: nothing, an empty folder, or a run directory (a folder holding a manifest.json)
    or a job's (rank-<N>/ run directories); never a file, a link (its target), a device (``/dev/null``), or a folder
    of something else (``--out . --force``)."""
    try:
        mode = os.lstat(out).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        what = "a symbolic link"
    elif not stat.S_ISDIR(mode):
        what = "not a directory"
    elif not ((out / MANIFEST).is_file() or is_job_directory(out) or not os.listdir(out)):
        held = f"its {MANIFEST} is not a regular file" if (out / MANIFEST).exists() else f"no {MANIFEST}"
        what = f"a directory that is not a kernelscope run ({held})"
    else:
        return
    raise KernelscopeError(out, f"is {what}; overwrite=True (CLI: --force) replaces only a run directory")


def _nearest_existing(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _make_parents(out: Path) -> list[Path]:
    """Create the missing folders above ``out``, outermost first; returns those this call created (another
    rank of the job may create the job directory at the same time)."""
    missing = []
    folder = out.parent
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    created = []
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        created.append(folder)
    return created


def _remove_made(created: list[Path]) -> None:
    """Remove the folders a failed write created, innermost first, where nothing else has been put in them."""
    for folder in reversed(created):
        try:
            folder.rmdir()
        except OSError:
            return


def write_run(
    out: Path,
    prof: torch.profiler.profile,
    book: CappedSampleBook,
    manifest: dict,
    *,
    tensor_limit_bytes: int | None,
    overwrite: bool,
    durable: bool = True,
) -> dict:
    """Export the trace, the sample store and the manifest into ``out``; return the manifest written.

    ``durable``: the files are flushed to disk before the run is renamed into place, so that a crash leaves a
    complete run or none; a temporary run, removed when its profiler is released, is not (the flushes cost a
    journal commit each), and its sample tensors are not saved: the profiler holds them, live, in function_data, and
    copying them off the device into samples.pt cost more than the rest of a small model's profile(). A temporary
    run's ``out`` is the empty folder the profiler has just made for it, which nobody else reads: its files are
    written there, with no folder probed for writing, staged or renamed (a folder made and removed cost a small
    model's profile() ~0.6 ms)."""
    if not durable:
        with errors_naming(out, out):
            _write_files(out, prof, book, manifest, tensor_limit_bytes, durable)
        return manifest
    check_destination(out, overwrite)
    created = _make_parents(out)  # what the user named: a rank's run, the job directory the ranks share
    with errors_naming(out):  # an OSError of the staging folder names out, the folder the user gave
        try:  # make_temp_dir: the umask's mode, not mkdtemp's 0700
            staging = Path(make_temp_dir(out.parent, f".{out.name}.", ".partial"))
        except BaseException:
            _remove_made(created)
            raise
        try:
            _write_files(staging, prof, book, manifest, tensor_limit_bytes, durable)
            _sync(staging)
            _move_into_place(staging, out, overwrite)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            _remove_made(created)
            raise
    return manifest


def _write_files(
    folder: Path, prof: torch.profiler.profile, book: CappedSampleBook, manifest: dict, tensor_limit_bytes, durable
) -> None:
    """The trace, the sample store (samples.pt only where ``durable``) and the manifest, written into ``folder``."""
    raw = folder / "trace.json"
    export_trace(prof, folder, raw.name)
    if not raw.is_file():  # Kineto's export says nothing when its write fails
        raise OSError(errno.EIO, "torch.profiler's export wrote no trace (is the disk full?)", str(folder))
    gzip_file(raw, folder / TRACE)
    raw.unlink()
    store = {"format_version": SAMPLES_FORMAT, "functions": book.metadata()}
    (folder / SAMPLES).write_bytes(orjson.dumps(store))
    manifest["sample_tensors"] = (
        _write_tensors(folder / SAMPLE_TENSORS, book, tensor_limit_bytes) if durable else _held_in_memory(book)
    )
    manifest["files"] = {
        "trace": TRACE,
        "samples": SAMPLES,
        "sample_tensors": SAMPLE_TENSORS if manifest["sample_tensors"]["saved"] else None,
    }
    (folder / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))


def _sync(directory: Path) -> None:
    """Flush the staged files and the directory itself, so the rename publishes complete files."""
    for path in (*directory.iterdir(), directory):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _move_into_place(staging: Path, out: Path, overwrite: bool) -> None:
    """Rename ``staging`` to ``out``. With ``overwrite``, a run at ``out`` is moved aside first, removed once the new
    one is in place, and put back if the swap fails, so a failure leaves the old run, never no run; without it, a run
    put at ``out`` since ``check_destination`` is a RunExistsError.

    Writers racing for one ``out`` (two ``profile(out=X, overwrite=True)``) leave nothing behind in any interleaving:
    a run that another writer puts in place, or moves aside, between these steps is moved aside and removed in its
    turn, so the last writer's run stands, whole."""
    while True:
        try:
            publish(os.rename, staging, out)  # where out is missing (or an empty folder, which overwrite may replace)
            return
        except OSError as exc:
            if exc.errno not in _OCCUPIED:
                raise
        if not overwrite:
            raise RunExistsError(
                out, "already exists; choose another path, or replace it with overwrite=True (CLI: --force)"
            )
        aside = out.parent / f".{out.name}.{uuid.uuid4().hex}.old"
        try:
            os.rename(out, aside)
        except FileNotFoundError:  # another writer moved it aside meanwhile
            continue
        except BaseException:  # a signal just after the move: the old run goes back, not left aside with none in place
            if os.path.lexists(aside):
                _put_back(aside, out)
            raise
        try:
            publish(os.rename, staging, out)
        except OSError as exc:
            if exc.errno not in _OCCUPIED:
                _put_back(aside, out)
                raise
            shutil.rmtree(aside, ignore_errors=True)  # another writer's run is in place: the old one is replaced
            continue  # and ours replaces that one in its turn
        except BaseException:
            _put_back(aside, out)
            raise
        try:
            shutil.rmtree(aside, ignore_errors=True)
        except BaseException:  # a signal while the old run is removed: the new one is in place, so it goes all the same
            shutil.rmtree(aside, ignore_errors=True)
            raise
        return


_OCCUPIED = (errno.EEXIST, errno.ENOTEMPTY)  # a rename onto a folder that holds files


def _put_back(aside: Path, out: Path) -> None:
    """Put the run moved aside back at ``out``, or remove it where another writer's run is there now (where the file
    system refuses both renames, the old run stays aside rather than be lost, and the first failure propagates)."""
    try:
        os.rename(aside, out)
    except OSError as exc:
        if exc.errno in _OCCUPIED:
            shutil.rmtree(aside, ignore_errors=True)


def _kept_samples(book: CappedSampleBook) -> dict[str, list]:
    """Per function, its samples, None where the recorder did not keep the inputs (over the sample memory cap)."""
    return {
        name: [sample if book.is_kept(name, i) else None for i, sample in enumerate(samples)]
        for name, samples in book.samples.items()
    }


def _kept_bytes(kept: dict[str, list]) -> int:
    return sum(tensor_bytes(sample) for samples in kept.values() for sample in samples if sample is not None)


def _held_in_memory(book: CappedSampleBook) -> dict:
    return {"saved": False, "bytes": _kept_bytes(_kept_samples(book)), "reason": TEMPORARY_RUN_TENSORS}


def _write_tensors(path: Path, book: CappedSampleBook, limit: int | None) -> dict:
    kept = _kept_samples(book)
    total = _kept_bytes(kept)
    if limit is not None and total > limit:
        sizes = {"saved": False, "bytes": total, "limit_bytes": limit}
        return {**sizes, "reason": why_not_saved(sizes)}
    left_out = save_samples({"format_version": SAMPLES_FORMAT}, kept, path)
    if left_out:
        warnings.warn(
            f"kernelscope: the inputs of {left_out} distinct {'signature' if left_out == 1 else 'signatures'} hold "
            "tensors that cannot be saved as plain "
            "tensors (a subclass with no storage of its own, as MaskedTensor, or a FakeTensor): samples.pt leaves "
            "them out; function_data holds them live",
            RuntimeWarning,
            stacklevel=5,  # profile()'s caller: profile -> _profile -> write_run -> here
        )
    return {"saved": True, "bytes": total, "limit_bytes": limit}


def checked_tags(tags: Any) -> dict:
    """The user's tags as the manifest keeps them; a ValueError, before the model runs, for tags that the manifest
    cannot hold: not a dict, a key that is not a string, a value that is not JSON, or nested deeper than the analyzer
    reads a manifest."""
    if tags is None:
        return {}
    if not isinstance(tags, dict):
        raise ValueError(f"tags must be a dict of JSON values, not {type(tags).__name__}")
    try:
        orjson.dumps(tags)
    except orjson.JSONEncodeError as exc:
        raise ValueError(f"tags must be a dict of JSON values with string keys ({exc})") from None
    if nested_deeper_than(tags, MAX_NESTING - 1):  # the manifest holds them one level down: the analyzer's limit
        raise ValueError(f"tags must be nested at most {MAX_NESTING - 1} levels deep")
    return dict(tags)


def _utf8(word: str) -> str:
    """A command-line word as JSON holds it: the bytes of one that is not UTF-8 (Python keeps them as lone surrogates,
    which no JSON writer takes) as ``\\xff`` escapes."""
    try:
        return os.fsencode(word).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        return word.encode("utf-8", "backslashreplace").decode()


def base_manifest(
    *, device: str, warmup_iterations: int, samples_per_pass: int, tags: dict | None, calls: str = "all"
) -> dict:
    """The manifest's fields known before the recording (SPEC §2). With ``calls="all"``, the kernels of CUDA
    graph launches and of compiled regions outside any call are named ``GRAPH_REPLAY_CALL`` and
    ``COMPILED_REGION_CALL`` by the analyzer (annotation ``graph_replay_call``, ``compiled_region_call``)."""
    from kernelscope import __version__

    rank, world_size, backend = distributed_coordinates()
    return {
        "format_version": FORMAT_VERSION,
        "kernelscope_version": __version__,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "device": device,
        "gpu_name": torch.cuda.get_device_name() if device == "cuda" else None,
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python_version": platform.python_version(),
        "rank": rank,
        "world_size": world_size,
        "backend": backend,
        "command_line": [_utf8(word) for word in sys.argv],
        "git_commit": None,  # profile() fills it in from git_commit_in_background()
        "start_time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "annotation": {
            "module_prefix": MODULE_PREFIX,
            "function_prefix": FUNCTION_PREFIX,
            "sample_separator": SAMPLE_SEPARATOR,
            "module_separator": MODULE_SEPARATOR,
            "name_escape": NAME_ESCAPE,
            "scope": "torch._C._profiler._RecordFunctionFast (cat cpu_op)",
            **(
                {"graph_replay_call": GRAPH_REPLAY_CALL, "compiled_region_call": COMPILED_REGION_CALL}
                if calls == "all"
                else {}
            ),
        },
        "warmup_iterations": warmup_iterations,
        "samples_per_pass": samples_per_pass,
        "tags": checked_tags(tags),
    }
