"""Processes adding to one archive at once, for tests/test_archive.py: imported once, then forked (no DuckDB
connection is open in this process when it forks), so that many writers start in milliseconds.

    python archive_writers.py writers ARCHIVE SEED KILLS SOURCES...   (the sources split among 16 processes)
    python archive_writers.py kill-after-renames SOURCE ARCHIVES...   (the Nth archive's add killed after N renames)

Prints one JSON object: what each process said (``started``/``added`` with the source and run id) and which
processes were killed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time

from kernelscope.analyzer import archive_commit
from kernelscope.analyzer.archive import Archive

PROCESSES = 16


def _child(index: int, archive: str, sources: list[str], report: int) -> None:
    try:
        for source in sources:
            os.write(report, f"started {index} {source}\n".encode())
            run_id, added = Archive(archive, create=True).add(source)
            os.write(report, f"{'added' if added else 'found'} {index} {source} {run_id}\n".encode())
    except BaseException as exc:  # reported, so that the test fails naming it
        os.write(report, f"failed {index} {type(exc).__name__}: {exc}".replace("\n", " ").encode() + b"\n")
        os._exit(1)
    os._exit(0)


def _fork(target, *args) -> int:
    pid = os.fork()
    if pid == 0:
        target(*args)
    return pid


def writers(archive: str, seed: int, kills: int, sources: list[str]) -> dict:
    """16 processes add their share of ``sources``; ``kills`` of them, chosen with ``seed``, get SIGKILL a random
    0-250 ms after they start the add of a random one of their sources (inside the add, or just after it)."""
    read, write = os.pipe()
    rounds = -(-len(sources) // PROCESSES)
    shares = [sources[i * rounds : (i + 1) * rounds] for i in range(PROCESSES)]
    pids = [_fork(_child, i, archive, shares[i], write) for i in range(PROCESSES)]
    os.close(write)
    rng = random.Random(seed)
    doomed = {i: (rng.randrange(len(shares[i])), rng.uniform(0.0, 0.25)) for i in rng.sample(range(PROCESSES), kills)}
    lines = []
    with os.fdopen(read) as report:
        for line in report:
            lines.append(line.rstrip("\n"))
            word, index, *_ = line.split()
            if word == "started" and int(index) in doomed:
                nth, delay = doomed[int(index)]
                if sum(1 for seen in lines if seen.startswith(f"started {index} ")) == nth + 1:
                    time.sleep(delay)
                    os.kill(pids[int(index)], signal.SIGKILL)  # a zombie (exited already) takes it too
    statuses = [os.waitpid(pid, 0)[1] for pid in pids]
    return {"lines": lines, "statuses": statuses}


def kill_after_renames(archives: list[str], source: str) -> dict:
    """The nth archive's add of ``source`` killed right after its nth rename (the first before any)."""

    def child(archive: str, renames: int) -> None:
        done = [0]
        rename = os.rename

        def counted(src, dst):
            if renames == 0:
                os.kill(os.getpid(), signal.SIGKILL)
            rename(src, dst)
            done[0] += 1
            if done[0] == renames:
                os.kill(os.getpid(), signal.SIGKILL)

        archive_commit.os.rename = counted
        Archive(archive, create=True).add(source)
        os._exit(0)

    return {"statuses": [os.waitpid(_fork(child, archive, n), 0)[1] for n, archive in enumerate(archives)]}


def _read_all(fd: int) -> list[str]:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks).decode().splitlines()


if __name__ == "__main__":
    mode, *arguments = sys.argv[1:]
    if mode == "writers":
        archive_path, seed, kills, *sources = arguments
        result = writers(archive_path, int(seed), int(kills), sources)
    else:
        source, *archives = arguments
        result = kill_after_renames(archives, source)
    print(json.dumps(result))
