"""The commit a working directory's repository is at (``git_commit``, the manifest's field), asked of git once and
known again while nothing it read changed.

Asking is a ``git rev-parse`` subprocess (a few ms of wall time, and a core, per recording). Its answer is kept per
working directory and environment, with the state of every file git resolved it from: the ``.git`` entries of the
directory and each folder up to the top of the work tree (a repository made inside the tree is found first), the
repository's ``HEAD``, the branch's loose ref, ``packed-refs`` and ``reftable/tables.list``. Git replaces a file it
updates (a new inode), so a commit, checkout, reset or fetch into the branch changes one of their states. That there
is no repository is known likewise, while no folder from the directory up has a ``.git`` or a ``HEAD``.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

_FileState = tuple[int, int, int, int] | None
_known: dict[tuple, tuple[list[tuple[str, _FileState]], str]] = {}  # (folder, environment) -> (files, commit)
# The path up to the work tree's top, the repository's folders, the commit, then HEAD's branch ("HEAD" when detached):
# --symbolic-full-name applies to the names after it.
_ASK = ["rev-parse", "--show-cdup", "--absolute-git-dir", "--git-common-dir", "HEAD", "--symbolic-full-name", "HEAD"]
UNUSUAL = object()
GIT_TIMEOUT_S = 5


def known_commit(folder: str) -> tuple[tuple, str | None]:
    """``(key, commit)``: the commit last answered for ``folder`` in this environment while the files it was
    resolved from are as they were ("" where there was no repository to find), else None; ``key`` is what
    ``ask_and_remember`` takes."""
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
        places = [(str(path), _state(path)) for path in _discovery_places(Path(folder))]
        if all(state is None for _, state in places):  # git had nothing to find: so while none of them appears
            _known[key] = (places, "")
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


def _discovery_places(folder: Path) -> list[Path]:
    """Where git looks for a repository from ``folder`` up: each folder's ``.git`` and ``HEAD`` (a repository's own
    folder, bare or ``.git``, has one); where none is there, git answers "not a git repository", so that a recording
    outside any (a job's scratch folder) spawned a ``git rev-parse`` every time (~0.7 ms of CPU, ~2.5 ms of wall)."""
    return [directory / name for directory in (folder, *folder.parents) for name in (".git", "HEAD")]


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


def git_commit_in_background(cwd: str | os.PathLike | None = None) -> Future:
    """git_commit(cwd), answered now where it is known (known_commit), else on a thread of its own, started now: the
    subprocess's few ms of wall time are spent while the model warms up instead of in line."""
    answer: Future = Future()
    folder = _folder(cwd)
    if folder is not None:
        _key, commit = known_commit(folder)
        if commit is not None:
            answer.set_result(commit or None)  # "": no repository
            return answer

    def look_up() -> None:
        try:
            answer.set_result(git_commit(cwd))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of result()
            answer.set_exception(exc)

    threading.Thread(target=look_up, name="kernelscope-git", daemon=True).start()
    return answer


def git_commit(cwd: str | os.PathLike | None = None) -> str | None:
    """``git rev-parse HEAD`` of the repository the command runs in; None outside one, without git, or when
    git does not answer within GIT_TIMEOUT_S (a recording never fails for want of this field). The answer is
    kept while the files git read for it are unchanged (known_commit)."""
    folder = _folder(cwd)
    commit = UNUSUAL
    if folder is not None:
        key, commit = known_commit(folder)
        if commit is None:
            commit = ask_and_remember(key, lambda arguments: run(arguments, folder, GIT_TIMEOUT_S))
    if commit is UNUSUAL:  # not a work tree: asked plainly, not kept
        commit = run(["rev-parse", "--verify", "--quiet", "HEAD"], cwd, GIT_TIMEOUT_S)
    commit = (commit or "").strip()
    if len(commit) not in (40, 64) or not all(c in "0123456789abcdef" for c in commit):
        return None
    return commit


def _folder(cwd: str | os.PathLike | None) -> str | None:
    try:
        return os.path.abspath(os.getcwd() if cwd is None else cwd)
    except OSError:  # the working directory was removed
        return None
