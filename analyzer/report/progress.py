"""Progress of a report on stderr: the step it is at, shown only once the work has taken about a second."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SHOW_AFTER_S = 1.0


@contextmanager
def steps(enabled: bool, console=None, show_after_s: float = SHOW_AFTER_S) -> Iterator[Callable[[str], None]]:
    """Yield ``step(description)``, called as each step starts. Where ``enabled`` (and stderr is a terminal, or
    a ``console`` is given), a transient rich spinner names the current step from ``show_after_s`` seconds on, so a
    quick report prints nothing."""
    if not enabled or (console is None and not sys.stderr.isatty()):
        yield lambda description: None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = Progress(
        SpinnerColumn(),
        TextColumn("report: {task.description}"),
        TimeElapsedColumn(),
        console=console or Console(file=sys.stderr),
        transient=True,
    )
    task = bar.add_task("starting", total=None)
    timer = threading.Timer(show_after_s, bar.start)
    timer.daemon = True
    timer.start()
    try:
        yield lambda description: bar.update(task, description=description)
    finally:
        timer.cancel()
        timer.join()
        bar.stop()
