"""Reads of a run that another process may replace meanwhile: `kernelscope record --force` (profile(overwrite=True))
renames the old run aside, renames the new one in and removes the old, so a reader that read the manifest before the
swap and the trace after it read two runs (an error naming the files of two runs at best; an archive filed the new
run's tables under the old run's id). A read during which the run changed is read again, so that all it read is of
one run."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from .errors import KernelscopeError

REREADS = 5  # a run replaced this many times in a row while read is being rewritten in a loop: say so instead
Read = TypeVar("Read")


def identity(path: str | os.PathLike) -> tuple | None:
    """What changes where the run (a trace file, a run directory, a job directory of ranks) at ``path`` is replaced:
    the inode and times of it and of each entry in it. None where nothing is there now."""
    try:
        info = os.stat(path)
        entries = sorted((entry.name, entry.inode()) for entry in os.scandir(path)) if os.path.isdir(path) else []
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns, tuple(entries)


def read_whole(path: str | os.PathLike, read: Callable[[], Read], close: Callable[[Read], object]) -> Read:
    """``read()`` of the run at ``path``, called again (after ``close`` of what it returned) where the run was replaced
    while it ran; an error it raised while the run was replaced is the replacement's doing, and read again too."""
    for _ in range(REREADS):
        before = identity(path)
        try:
            result = read()
        except (KernelscopeError, OSError):
            if identity(path) == before:  # None both times: nothing there, which the read's error says
                raise
            continue
        if before is not None and identity(path) == before:
            return result
        close(result)
    raise KernelscopeError(
        path, f"was replaced {REREADS} times while it was read (by kernelscope record --force?); read it once that ends"
    )
