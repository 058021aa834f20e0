"""The commit a working directory's repository is at, asked of git once and known again while nothing it read changed.

Asking is a ``git rev-parse`` subprocess (a few ms of wall time, and a core, per recording). Its answer is kept per
working directory and environment, with the state of every file git resolved it from: the ``.git`` entries of the
directory and each folder up to the top of the work tree (a repository made inside the tree is found first), the
repository's ``HEAD``, the branch's loose ref, ``packed-refs`` and ``reftable/tables.list``. Git replaces a file it
updates (a new inode), so a commit, checkout, reset or fetch into the branch changes one of their states.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

_FileState = tuple[int, int, int, int] | None
_known: dict[tuple, tuple[list[tuple[str, _FileState]], str]] = {}  # (folder, environment) -> (files, commit)
# The path up to the work tree's top, the repository's folders, the commit, then HEAD's branch ("HEAD" when detached):
# --symbolic-full-name applies to the names after it.
_ASK = ["rev-parse", "--show-cdup", "--absolute-git-dir", "--git-common-dir", "HEAD", "--symbolic-full-name", "HEAD"]
UNUSUAL = object()


def known_commit(folder: str) -> tuple[tuple, str | None]:
    """``(key, commit)``: the commit last answered for ``folder`` in this environment while the files it was
    resolved from are as they were, else None; ``key`` is what ``remember`` takes."""
    key = (folder, frozenset(os.environ.items()))
    known = _known.get(key)
    if known is None or any(_state(path) != state for path, state in known[0]):
        return key, None
    return key, known[1]


def ask_and_remember(key: tuple, run_git: Callable[[list[str]], str | None]) -> Any:
    """Ask git (``run_git(arguments)``: its output, None when it fails) for the commit and the files it read, and
    keep them: the commit, None where git has none (no repository, no commit yet), or ``UNUSUAL`` where git answered
    in another form than a work tree's (a bare repository, a folder inside ``.git``): the caller asks plainly."""
    folder = key[0]
    answer = run_git(_ASK)
    if answer is None:
        return None
    lines = answer.splitlines()
    if len(lines) != 5:
        return UNUSUAL
    up, git_dir, common_dir, commit, ref = lines
    common = Path(folder, common_dir)
    top = Path(os.path.normpath(os.path.join(folder, up)))
    paths = [*_dot_git_entries(Path(folder), top), Path(git_dir, "HEAD"), common / "packed-refs"]
    paths.append(common / "reftable" / "tables.list")
    if ref.startswith("refs/"):
        paths.append(common / ref)
    _known[key] = ([(str(path), _state(path)) for path in paths], commit)
    return commit


def _dot_git_entries(folder: Path, top: Path) -> list[Path]:
    entries = []
    for directory in (folder, *folder.parents):
        entries.append(directory / ".git")
        if directory == top:
            return entries
    return entries


def _state(path: str | os.PathLike) -> _FileState:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def forget() -> None:
    """Drop every answer kept (tests)."""
    _known.clear()


def run(arguments: list[str], cwd: str | os.PathLike | None, timeout: float) -> str | None:
    """``git <arguments>``'s output in ``cwd``, or None: git absent, failing, or silent for ``timeout`` seconds."""
    try:
        done = subprocess.run(
            ["git", *arguments],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None
