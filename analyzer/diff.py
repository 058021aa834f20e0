"""Compare two runs per function, module and kernel: time, calls, share, delta and ratio (diff.sql)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import pandas as pd

from .connection import new_connection
from .ranks import header_gpu_names
from .run import Run, load_run
from .samples import TensorMeta
from .sql import define_scope_names, sql_text

LEVELS = ("total", "function", "module", "kernel")


def diff(a: Run | str | os.PathLike, b: Run | str | os.PathLike) -> pd.DataFrame:
    """Run ``b`` against run ``a`` (each a Run or a path ``load_run`` reads): one row per level and name
    (``level`` total, function, module or kernel), sorted by absolute delta within each level. Runs of other
    devices, GPUs or input dtypes are compared all the same, with a UserWarning for each difference."""
    with _opened(a) as run_a, _opened(b) as run_b:
        for difference in differences(run_a, run_b):
            warnings.warn(f"kernelscope diff: {difference}; their times may not compare", UserWarning, stacklevel=3)
        side_a = _side(run_a)  # noqa: F841 (read by name below)
        side_b = _side(run_b)  # noqa: F841
    con = new_connection()
    try:
        con.register("side_a", side_a)
        con.register("side_b", side_b)
        frame = con.execute(sql_text("diff.sql")).df()
    finally:
        con.close()
    frame["name"] = frame["name"].astype(object).where(frame["name"].notna(), None)
    return frame.astype({"calls_a": "Int64", "calls_b": "Int64"})


def differences(a: Run, b: Run) -> list[str]:
    """What sets the two runs apart besides the model's time: the device measured, the GPU (manifest or the
    trace's deviceProperties), the dtypes of the recorded inputs (samples); each as one phrase."""
    found = []
    for phrase, read in (
        ("A ran on {}, B on {}", _device),
        ("A ran on {}, B on {}", _gpus),
        ("A's inputs are {}, B's {}", _dtypes),
    ):
        side_a, side_b = read(a), read(b)
        if side_a and side_b and side_a != side_b:
            found.append(phrase.format(side_a, side_b))
    return found


def regressions(frame: pd.DataFrame, above_pct: float) -> pd.DataFrame:
    """The rows of a diff that gate a CI run: the total or a function whose time grew by more than
    ``above_pct`` percent (something new in B counts as infinitely more). Time outside any function is
    in the total, not gated by itself."""
    gated = frame[(frame["level"] == "total") | ((frame["level"] == "function") & frame["name"].notna())]
    return gated[gated["delta_pct"].fillna(0.0) > above_pct]


@contextmanager
def _opened(run: Run | str | os.PathLike) -> Iterator[Run]:
    if isinstance(run, Run):
        yield run
        return
    with load_run(run) as loaded:
        yield loaded


def _device(run: Run) -> str:
    return run.device


def _gpus(run: Run) -> str:
    names = {(manifest or {}).get("gpu_name") for manifest in run.manifests.values()}
    for part in run.parts.values():
        if part.manifest is None and part.header is not None:
            names |= set(header_gpu_names(part.header.keys))
    return ", ".join(sorted(str(name) for name in names if name))


def _dtypes(run: Run) -> str:
    found: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, TensorMeta):
            found.add(value.dtype)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)

    for entries in run.function_data().values():
        for _calls, sample in entries:
            walk(sample)
    return ", ".join(sorted(found))


def _side(run: Run) -> pd.DataFrame:
    con = run.con
    define_scope_names(
        con,
        run.module_prefix,
        run.function_prefix,
        run.graph_replay_call,
        run.compiled_region_call,
        run.other_operator_call,
        names_escaped=run.names_escaped,
    )
    return con.execute(sql_text("diff_side.sql")).df()
