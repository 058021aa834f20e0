"""Files and folders made safely: written through a temporary sibling that is flushed to disk and renamed into
place (a failure leaves no half file, a crash no empty one), created with the user's umask (not tempfile's
0600/0700, so colleagues can read a shared archive), and never put in place of anything but a regular file."""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import KernelscopeError, OutputExistsError

_ATTEMPTS = 100
_ERRNO = re.compile(r'"errno":\s*"(\d+)"')  # the system's error number in a DuckDB IO Error's JSON
_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def refuse_unless_regular(path: str | os.PathLike) -> None:
    """Fail when ``path`` exists and is not a regular file (a link, directory, device, FIFO or socket): replacing it
    would replace ``/dev/null`` or a link instead of writing where it points."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise KernelscopeError(path, f"is {kind_of(mode)}, not a regular file; kernelscope replaces only regular files")


def unreadable_link(path: str | os.PathLike) -> str | None:
    """Why ``path``, which names no file or folder, is there all the same: a symbolic link to nothing, or one that
    loops (or one in a folder that cannot be searched); None where nothing is at it."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return "is a symbolic link to a file that does not exist" if os.path.islink(path) else None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None


def refuse_unless_utf8(path: str | os.PathLike, what: str, shown: str | os.PathLike | None = None) -> None:
    """Fail before anything is written when ``path`` is not UTF-8 (a folder named in Latin-1): DuckDB, which writes
    ``what`` (``a Parquet file``), takes UTF-8 paths only. ``shown``: the path the message names (default ``path``)."""
    try:
        os.fspath(path).encode()
    except UnicodeEncodeError:
        raise KernelscopeError(shown or path, f"is not a UTF-8 path, which DuckDB cannot write {what} at") from None


_PUBLISHED: list[tuple[str, tuple[int, int]]] = []  # each output this process put in place, and what it moved there


def publish(
    move: Callable[[str, str], object], source: str | os.PathLike, target: str | os.PathLike, output: bool = True
) -> None:
    """Put an output in place with ``move(source, target)`` (a rename or a hard link), noting first what it moves
    (device and inode): a signal may end the process between the move and the next line, and whether the output
    is in place is then told from the file system (published_since). ``output=False``: a move not noted."""
    if output:
        info = os.lstat(source)
        _PUBLISHED.append((os.path.abspath(target), (info.st_dev, info.st_ino)))
    move(os.fspath(source), os.fspath(target))


def publications() -> int:
    """How many outputs this process has put in place (or tried to): a mark for published_since."""
    return len(_PUBLISHED)


def published_since(mark: int) -> list[str]:
    """The outputs put in place after ``mark`` (publications()) that are there still, by absolute path."""
    found = []
    for path, identity in _PUBLISHED[mark:]:
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) == identity:
            found.append(path)
    return found


def kind_of(mode: int) -> str:
    """What a file of ``mode`` (``st_mode``) is, for a message: ``a directory``, ``a FIFO``…"""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def make_temp_file(folder: str | os.PathLike, prefix: str, suffix: str = "") -> str:
    """A new empty file ``folder/<prefix><random><suffix>``, with the mode the umask gives (mkstemp's is 0600)."""
    for _ in range(_ATTEMPTS):
        path = os.path.join(folder, f"{prefix}{secrets.token_hex(4)}{suffix}")
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666))
        except FileExistsError:
            continue
        return path
    raise FileExistsError(errno.EEXIST, "no free temporary file name", os.fspath(folder))


def make_temp_dir(folder: str | os.PathLike, prefix: str, suffix: str = "") -> str:
    """A new empty folder ``folder/<prefix><random><suffix>``, with the mode the umask gives (mkdtemp's is 0700)."""
    for _ in range(_ATTEMPTS):
        path = os.path.join(folder, f"{prefix}{secrets.token_hex(4)}{suffix}")
        try:
            os.mkdir(path, 0o777)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(errno.EEXIST, "no free temporary folder name", os.fspath(folder))


def fsync_file(path: str | os.PathLike) -> None:
    """Flush a written (and closed) file's data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a folder's entries (the names renamed into it) to disk; a file system that cannot is left as it is."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


@contextmanager
def errors_naming(path: str | os.PathLike, temporaries: str | os.PathLike | None = None) -> Iterator[None]:
    """An OSError raised while ``path`` is written through ``temporaries`` (by default its siblings ``.<name>.*``: a
    temporary file, a staging folder, what it holds) names ``path`` where it named one of them or no file: the user
    gave ``path``, and a temporary's random name, gone by the time it is read, tells them nothing; and where it named
    ``path`` made absolute, as given. The exception itself propagates."""
    absolute = os.path.abspath(path)
    folder, name = os.path.split(absolute)
    prefix = os.path.abspath(temporaries) + os.sep if temporaries is not None else os.path.join(folder, f".{name}.")
    try:
        yield
    except OSError as exc:
        named = exc.filename
        held = os.path.abspath(named) if isinstance(named, str) else None
        if named is None or held is not None and (held.startswith(prefix) or held == absolute):
            exc.filename = os.fspath(path)
            if exc.filename2 is not None:
                del exc.filename2  # not None, which str(exc) shows as "… -> None"
        raise


def unwritten(path: str | os.PathLike, exc: Exception) -> Exception:
    """The error to raise for a DuckDB write to ``path`` (or to its temporaries) that failed: an OSError of the
    system's reason naming ``path`` where DuckDB's message carries one (a full disk), else a KernelscopeError with
    DuckDB's first line."""
    text = str(exc)
    found = _ERRNO.search(text)
    reasons = (code for code in sorted(errno.errorcode) if text.rstrip().endswith(f": {os.strerror(code)}"))
    code = int(found[1]) if found else next(reasons, None)
    if code is not None:
        return OSError(code, os.strerror(code), os.fspath(path))
    lines = text.strip().splitlines()
    return KernelscopeError(path, f"could not be written ({lines[0] if lines else type(exc).__name__})")


def replace_atomically(
    path: Path, write: Callable[[str], object], *, overwrite: bool = True, output: bool = True
) -> None:
    """Call ``write(tmp)`` on a temporary sibling of ``path``, flush it to disk, then rename it to ``path``. Without
    ``overwrite`` it is put in place only where ``path`` still does not exist (OutputExistsError otherwise): another
    command may have written it while this one worked, and a rename would replace that file. ``output``: the file
    is what the user asked for, published (not a file kept for kernelscope's own use, such as an archive's marker)."""
    refuse_unless_regular(path)
    folder = path.parent if str(path.parent) else Path(".")
    with errors_naming(path):
        tmp = make_temp_file(folder, f".{path.name}.")
        try:
            write(tmp)
            fsync_file(tmp)
            refuse_unless_regular(path)  # again: the work may have taken long
            if overwrite or not _linked_in_place(tmp, path, output):
                publish(os.replace, tmp, path, output)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        fsync_dir(folder)


def _linked_in_place(tmp: str, path: Path, output: bool) -> bool:
    """Give ``tmp`` the name ``path`` unless a file has it (a hard link fails where the name exists, where a rename
    would replace it), and drop the name ``tmp``; False where the file system makes no hard links."""
    try:
        publish(os.link, tmp, path, output)
    except FileExistsError:
        raise OutputExistsError(path, "already exists; choose another name, or replace it with --force") from None
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
            return False  # no hard links here (FAT, some network file systems): the check before the work stands
        raise
    os.unlink(tmp)
    return True


def write_bytes_atomically(path: Path, data: bytes, *, overwrite: bool = True, output: bool = True) -> None:
    replace_atomically(path, lambda tmp: Path(tmp).write_bytes(data), overwrite=overwrite, output=output)
