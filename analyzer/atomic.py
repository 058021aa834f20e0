"""Write a file through a temporary sibling and rename it into place: a failure leaves no half file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def replace_atomically(path: Path, write: Callable[[str], object]) -> None:
    """Call ``write(tmp)`` on a temporary sibling of ``path``, then rename it to ``path``."""
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    os.close(handle)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes_atomically(path: Path, data: bytes) -> None:
    replace_atomically(path, lambda tmp: Path(tmp).write_bytes(data))
