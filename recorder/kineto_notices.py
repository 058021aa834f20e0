"""libkineto prints ``USDT:… profiler_start`` and ``… profiler_stop`` on stderr each time a profiler starts and
stops (and, where a CUDA build of torch finds no usable GPU, an ERROR line about the device count as it starts),
whatever its log level allows short of silencing its errors too (KINETO_LOG_LEVEL is read once per process, and
the level that hides them hides every message). A recording drops exactly those lines: stderr
(file descriptor 2) goes to a temporary file while the profiler starts and while it stops, never while the
model runs, and everything else written there in that time is written back to stderr afterwards."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# its start and stop notices, and, from a CUDA build of torch on a machine without a usable GPU (a recording on the
# CPU then), the line its start prints about the device count: "ERROR: ... gpuGetDeviceCount failed with code 35"
NOTICE = re.compile(
    rb"^(?:USDT:[^\n]* profiler_(?:start|stop)|ERROR:[^\n]* DeviceProperties\.cpp:\d+\] gpuGetDeviceCount failed "
    rb"with code \d+)\r?\n",
    re.MULTILINE,
)


@contextmanager
def quiet_start_and_stop(profiler: Any) -> Iterator[Any]:
    """``with profiler`` without libkineto's start and stop notices."""
    with notices_dropped():
        profiler.__enter__()
    try:
        yield profiler
    except BaseException:
        with notices_dropped():
            try:
                stopped = profiler.__exit__(*sys.exc_info())
            except Exception:  # noqa: BLE001 - torch 2.11's stop of a session the model's own profiler ended raises
                stopped = False  # "Can't disable Kineto profiler": why the block failed says more, and is raised
            if not stopped:
                raise
    else:
        with notices_dropped():
            profiler.__exit__(None, None, None)


@contextmanager
def notices_dropped() -> Iterator[None]:
    """Hold what is written to file descriptor 2 meanwhile, and write it back without libkineto's notices."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (AttributeError, OSError, ValueError):  # no stderr to speak of (closed, or not a file descriptor)
        yield
        return
    held = tempfile.TemporaryFile()
    try:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except (AttributeError, OSError, ValueError):
                pass
            os.dup2(saved, 2)
    finally:
        os.close(saved)
        held.seek(0)
        kept = NOTICE.sub(b"", held.read())
        held.close()
        while kept:
            kept = kept[os.write(2, kept) :]
