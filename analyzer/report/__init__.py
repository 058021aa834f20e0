"""The HTML report of a run, and the page comparing two runs: one self-contained file each (docs/report.md),
laid out from the analyzer's views by jinja2 templates, charts drawn by plotly.js inlined in the page."""

from __future__ import annotations

import os
from pathlib import Path

from ..diff import differences
from ..run import Run
from .progress import steps
from .render import render_comparison, render_report, write_html
from .views import comparison_views, run_header, run_views

__all__ = ["write_comparison", "write_report"]


def write_report(
    run: Run,
    path: str | os.PathLike,
    *,
    name: str | None = None,
    rank: int | None = None,
    progress: bool = False,
    overwrite: bool = True,
) -> Path:
    """Write the report of ``run`` to ``path`` (HTML); ``name`` heads the page (default: the run's path); ``rank``:
    only that rank of a job (default: its ranks together); without ``overwrite``, an existing ``path`` is left as it
    is (OutputExistsError)."""
    path = Path(path)
    with steps(progress) as step:
        step("reading the module tree, calls and kernels")
        views = run_views(run, name or str(run.path), rank)
        step("laying out the page")
        html = render_report(views, _version())
        step(f"writing {path}")
        write_html(path, html, overwrite=overwrite)
    return path


def write_comparison(
    a: Run,
    b: Run,
    path: str | os.PathLike,
    *,
    names: tuple[str, str] | None = None,
    progress: bool = False,
    overwrite: bool = True,
) -> Path:
    """Write the page comparing run ``b`` against run ``a`` to ``path`` (HTML); ``overwrite`` as write_report's."""
    path = Path(path)
    name_a, name_b = names or (str(a.path), str(b.path))
    with steps(progress) as step:
        step("comparing the runs")
        rows, chart = comparison_views(a, b)
        header_a, header_b = run_header(a, name_a), run_header(b, name_b)
        step("laying out the page")
        html = render_comparison(header_a, header_b, rows, chart, _version(), differences(a, b))
        step(f"writing {path}")
        write_html(path, html, overwrite=overwrite)
    return path


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kernelscope")
    except PackageNotFoundError:
        return "unknown"
