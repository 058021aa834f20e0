"""The trace of a recording, exported by torch.profiler (Kineto) and compressed into the run's trace.json.gz."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from kernelscope.analyzer.gzip_members import MEMBER_BYTES, write_members

GZIP_LEVEL = 2  # ISA-L's igzip (the analyzer's reader too): as small as zlib's level 3, and faster (RESULTS.md)
GZIP_MEMBER_BYTES = MEMBER_BYTES  # JSON per gzip member: members decompress in parallel in the analyzer


def export_trace(prof: torch.profiler.profile, folder: Path, name: str) -> None:
    """Kineto's export of the trace to ``folder``/``name``. Kineto drops a newline from the path it renames its .tmp
    file to, and reads a backslash as a '/': under such a folder it exports through the folder's descriptor (Linux's
    /proc/self/fd), a path of neither (check_destination refuses a path that is not UTF-8, which it cannot take)."""
    path = str(folder / name)
    if "\n" not in path and "\\" not in path:
        prof.export_chrome_trace(path)
        return
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        prof.export_chrome_trace(f"/proc/self/fd/{fd}/{name}" if os.path.isdir(f"/proc/self/fd/{fd}") else path)
    finally:
        os.close(fd)


def gzip_file(source: Path, target: Path) -> None:
    """Compress ``source`` into the gzip file ``target`` with ISA-L at GZIP_LEVEL, as members of 32 MiB of JSON
    whose headers say where each ends, which the analyzer decompresses in parallel (analyzer/gzip_members.py);
    any gzip reader reads them as one stream. Not through a GzipFile: on Python 3.12 its writer is a reference
    cycle (its buffer holds it), closed whenever the cyclic collector runs next, inside a torch.compile'd region
    too, where dynamo then compiles GzipFile.closed (seen on the H200)."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        write_members(src, dst, GZIP_LEVEL, GZIP_MEMBER_BYTES)
