"""How runs enter an archive with many writers at once and no lock (docs/format.md, "Archives").

Each add has a token of its own (its process's id, start time and machine, and a random part). It writes its
files in ``.staging/<run_id>.<token>/``, renames the data files into their partitions under names that carry
the token (``part-<token>.parquet``: no other add can hold that name), and then commits with one rename, of its
``runs/run_id=<id>/`` folder (all ranks) into place. That rename fails when another add committed the run
first, and the loser removes its files. Readers read only the files that a committed ``runs`` folder names,
so an add interrupted anywhere shows nothing. The staging folder is removed last: while it is there, it
records what its add may have left, and a later add removes that once the process that owned it has died.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import shutil
import socket
import stat
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .atomic import fsync_dir, fsync_file, kind_of, publish, write_bytes_atomically
from .errors import BadInputError, KernelscopeError
from .ranks import ARCHIVE_MARKER
from .sql import quote

DATA_TABLES = ("events", "kernels", "samples")
TABLES = (*DATA_TABLES, "runs")  # runs last: its folder commits a run
STAGING = ".staging"
_RUN = re.compile(r"run_id=(run-[0-9a-f]{12})")
_RANK = re.compile(r"rank=(0|[1-9][0-9]{0,9})")
_PART = re.compile(r"part-([0-9a-z.]{1,80})\.parquet")
_GLOB_CHARACTERS = re.compile(r"[\[*?]")
_STAGED = re.compile(r"(run-[0-9a-f]{12})\.([0-9]+\.[0-9]+\.[0-9a-f]{12}\.[0-9a-f]{8})")
MAX_RANK = (1 << 31) - 1
_RENAME_ATTEMPTS = 5


@dataclass(frozen=True)
class Part:
    """One rank of a committed run: its files are ``<table>/run_id=<run_id>/rank=<rank>/part-<token>.parquet``."""

    run_id: str
    rank: int
    token: str

    def path(self, root: Path, table: str) -> Path:
        return root / table / f"run_id={self.run_id}" / f"rank={self.rank}" / f"part-{self.token}.parquet"


def committed_parts(root: Path, run_id: str | None = None) -> list[Part]:
    """The ranks of the committed runs (of ``run_id`` only, when given), by run id and rank. Folders and files
    not named as kernelscope names them are not read."""
    runs = os.path.join(root, "runs")
    run_dirs = [f"run_id={run_id}"] if run_id is not None else _names(runs)
    parts = []
    for run_dir in filter(_RUN.fullmatch, run_dirs):  # also keeps a given run_id from naming another folder
        run_path = f"{runs}{os.sep}{run_dir}"  # not os.path.join: this loop runs once per archived run
        for rank_dir in _names(run_path):
            rank = _RANK.fullmatch(rank_dir)
            if rank is None or int(rank.group(1)) > MAX_RANK:
                continue
            files = _names(f"{run_path}{os.sep}{rank_dir}")
            tokens = sorted(match.group(1) for match in map(_PART.fullmatch, files) if match)
            if tokens:
                parts.append(Part(run_dir[len("run_id=") :], int(rank.group(1)), tokens[0]))
    return sorted(parts, key=lambda p: (p.run_id, p.rank))


def regular_files(paths: list[Path]) -> list[Path]:
    """``paths``, each checked not to be a FIFO, device, socket or directory (through links) before DuckDB opens it:
    its open of a FIFO waits for a writer forever, in a thread no signal ends. A missing file is left to DuckDB's
    read, which names it as the damage it is."""
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:  # a link that loops, a folder that cannot be searched
            raise BadInputError(path, f"cannot be read ({exc.strerror or exc})") from None
        if not stat.S_ISREG(mode):
            raise BadInputError(path, f"is {kind_of(mode)}, not a regular file (the archive is damaged)")
    return paths


def file_list(files: list[Path]) -> str:
    """``files`` as a DuckDB list of paths, their glob characters escaped: each is read as the one file it names."""
    return "[" + ", ".join(quote(_GLOB_CHARACTERS.sub(r"[\g<0>]", str(file))) for file in files) + "]"


def _names(folder: str | Path) -> list[str]:
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


@dataclass(frozen=True)
class Owner:
    """The process that made a token: its pid, its start time (clock ticks after boot, 0 where unknown) and its
    machine (a hash of the boot id and the pid namespace: a pid means this process only there)."""

    pid: int
    start: int
    machine: str

    @classmethod
    def of_token(cls, token: str) -> Owner:
        pid, start, machine, _random = token.split(".")
        return cls(int(pid), int(start), machine)

    def is_dead(self) -> bool:
        """True only when this process is known to have ended: on another machine nothing is known."""
        if self.machine != _this_machine():
            return False
        if self.start:
            return _start_time(self.pid) != self.start  # ended, or its pid now belongs to a later process
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def new_token() -> str:
    """A token for one add of this process: pid, start time, machine, random."""
    return f"{os.getpid()}.{_start_time(os.getpid())}.{_this_machine()}.{secrets.token_hex(4)}"


def _start_time(pid: int) -> int:
    """The process's start time in clock ticks after boot (/proc/PID/stat field 22); 0 without /proc, for no such
    process, and for one that has ended and not been waited for (a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            text = stream.read()
    except OSError:
        return 0
    fields = text[text.rfind(b")") + 2 :].split()  # after the command name, which may hold spaces and ')'
    if len(fields) < 20 or fields[0] in (b"Z", b"X") or not fields[19].isdigit():
        return 0
    return int(fields[19])


@cache
def _this_machine() -> str:
    identity = socket.gethostname()
    try:
        with open("/proc/sys/kernel/random/boot_id") as stream:
            identity = stream.read().strip()
        identity += f":{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        pass
    return hashlib.sha256(identity.encode()).hexdigest()[:12]


def ensure_dirs(root: Path, *names: str) -> Path:
    """``root/names[0]/names[1]/…``, each made when missing (with the umask's mode), each a real folder: a
    symbolic link inside the archive (``kernels/``, ``.staging/``) is refused, never written through."""
    folder = root
    for name in names:
        folder = folder / name
        try:
            os.mkdir(folder, 0o777)
        except FileExistsError:
            _refuse_unless_folder(folder)
    return folder


def own_folder(root: Path, *names: str) -> Path | None:
    """``root/names[0]/…`` where each is a real folder, None where one is missing; a symbolic link is refused as in
    ensure_dirs: what is removed from the archive is removed from its own folders, never through a link outside."""
    folder = root
    for name in names:
        folder = folder / name
        if not os.path.lexists(folder):
            return None
        _refuse_unless_folder(folder)
    return folder


def _refuse_unless_folder(folder: Path) -> None:
    if not stat.S_ISDIR(os.lstat(folder).st_mode):
        what = "a symbolic link" if os.path.islink(folder) else "not a folder"
        raise KernelscopeError(folder, f"is {what} inside the archive; kernelscope writes only into folders of its own")


class Add:
    """One add of one run: stage, publish, commit; ``abandon()`` removes whatever it put in the archive."""

    def __init__(self, root: Path, run_id: str):
        self.root, self.run_id, self.token = root, run_id, new_token()
        for attempt in range(_RENAME_ATTEMPTS):
            try:  # .staging may vanish between its mkdir and this one: another add removed it, empty
                staging = ensure_dirs(root, STAGING) / f"{run_id}.{self.token}"
                os.mkdir(staging, 0o777)
            except FileNotFoundError:
                if attempt == _RENAME_ATTEMPTS - 1:
                    raise
                continue
            self.staging = staging
            return

    def staged(self, table: str, rank: int) -> Path:
        """Where this add writes a table's file of one rank: the runs files in the folder the commit renames
        (``run_id=<id>/rank=<rank>/``), the others beside it."""
        if table != "runs":
            return self.staging / f"{table}-{int(rank)}.parquet"
        return ensure_dirs(self.staging, f"run_id={self.run_id}", f"rank={int(rank)}") / f"part-{self.token}.parquet"

    def commit(self, ranks: list[int]) -> bool:
        """Publish the staged files and commit; False when another add committed the run first (then this add's
        files are removed)."""
        parts = [Part(self.run_id, int(rank), self.token) for rank in ranks]
        for part in parts:
            for table in TABLES:
                fsync_file(self.staged(table, part.rank))
        for table in DATA_TABLES:
            for part in parts:
                _rename_into(self.staged(table, part.rank), part.path(self.root, table))
        staged_run = self.staging / f"run_id={self.run_id}"
        for part in parts:
            fsync_dir(staged_run / f"rank={part.rank}")
        fsync_dir(staged_run)
        try:
            publish(os.rename, staged_run, ensure_dirs(self.root, "runs") / staged_run.name)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            self.abandon()
            return False
        fsync_dir(self.root / "runs")
        _remove_staging(self.root, self.staging)
        return True

    def abandon(self) -> None:
        remove_add(self.root, self.run_id, self.token)


def _rename_into(staged_file: Path, target: Path) -> None:
    """Rename a staged file into its partition, then flush the partition folder. The folders are made first, and
    again when an add cleaning up after a dead one removed them meanwhile (it removes only empty ones)."""
    root, (table, run_dir, rank_dir) = target.parents[3], target.parent.parts[-3:]
    for attempt in range(_RENAME_ATTEMPTS):
        folder = ensure_dirs(root, table, run_dir, rank_dir)
        try:
            os.rename(staged_file, target)
        except FileNotFoundError:
            if attempt == _RENAME_ATTEMPTS - 1 or not staged_file.exists():
                raise
            continue
        fsync_dir(folder)
        return


def remove_add(root: Path, run_id: str, token: str) -> None:
    """Remove what the add ``token`` of ``run_id`` put in the archive, unless it committed: its data files (and
    the partition folders they leave empty), then its staging folder, the record of the add, last."""
    if not any(part.token == token for part in committed_parts(root, run_id)):
        for table in DATA_TABLES:
            run_dir = own_folder(root, table, f"run_id={run_id}")
            for rank_dir in _names(run_dir) if run_dir is not None else []:
                if own_folder(run_dir, rank_dir) is not None:
                    (run_dir / rank_dir / f"part-{token}.parquet").unlink(missing_ok=True)
                    _remove_if_empty(run_dir / rank_dir)
            if run_dir is not None:
                _remove_if_empty(run_dir)
    if own_folder(root, STAGING) is not None:
        _remove_staging(root, root / STAGING / f"{run_id}.{token}")


def remove_dead_adds(root: Path) -> list[str]:
    """Remove what adds whose process has died left (``kill -9``, a crash, a power loss); the staging folders of
    live processes, and of other machines, are left alone. Returns the staging folders removed."""
    removed = []
    staging = own_folder(root, STAGING)
    for name in sorted(_names(staging) if staging is not None else []):
        staged = _STAGED.fullmatch(name)
        if staged is not None and Owner.of_token(staged.group(2)).is_dead():
            remove_add(root, *staged.groups())
            removed.append(name)
    return removed


def unmake_archive(root: Path, made_folder: bool) -> bool:
    """Undo the making of an archive whose first add failed or was interrupted, so that no archive holding no run
    is left: its empty table and staging folders, its marker, and the folder where the add made it too. Only while
    nothing else is there: another process adding to it meanwhile keeps it (the marker is put back where that
    process came after the marker had gone). Returns whether it was undone."""
    marker = root / ARCHIVE_MARKER
    for name in (*TABLES, STAGING):
        try:
            (root / name).rmdir()
        except FileNotFoundError:
            pass
        except OSError:  # not empty: another add is in it
            return False
    if _names(root) != [marker.name]:
        return False
    held = marker.read_bytes()
    marker.unlink()
    try:
        if made_folder:
            root.rmdir()
        if not _names(root):
            return True
    except FileNotFoundError:
        return True
    except OSError:  # not empty
        pass
    write_bytes_atomically(marker, held, output=False)  # another process made files in it after the marker had gone
    return False


def _remove_staging(root: Path, staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)
    _remove_if_empty(root / STAGING)  # an add that makes its staging folder now makes .staging again


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
