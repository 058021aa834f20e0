"""The module tree: inclusive and own device time per module of the hierarchy (tree.sql), and the calls and
kernels whose innermost module each one is (module_calls.sql)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import duckdb
import pandas as pd

from .kernel_names import define_kernel_short
from .sql import sql_template

if TYPE_CHECKING:
    from .run import Run

# The rows a tree is built from: one rank's (the views), or all ranks' merged into rank NULL (a job as one tree).
PER_RANK = "kernels"
ALL_RANKS = "(SELECT * REPLACE (CAST(NULL AS INTEGER) AS rank) FROM kernels)"


def tree_query(kernels: str = PER_RANK) -> str:
    return sql_template("tree.sql").substitute(kernels=kernels)


def module_calls_query(kernels: str = PER_RANK) -> str:
    return sql_template("module_calls.sql").substitute(kernels=kernels)


def define_tree_views(con: duckdb.DuckDBPyConnection) -> None:
    """The views ``module_tree`` and ``module_calls`` over ``con``'s ``kernels`` (with ``rank``), per rank."""
    con.execute(f"CREATE OR REPLACE VIEW module_tree AS {tree_query()}")
    con.execute(f"CREATE OR REPLACE VIEW module_calls AS {module_calls_query()}")


def rows_of(run: Run, rank: int | None) -> str:
    """The relation of ``run``'s rows that a tree of ``rank`` reads: that rank's, the only rank's, or all merged."""
    if rank is not None:
        return f"(SELECT * FROM kernels WHERE rank = {run._rank(rank)})"
    return PER_RANK if len(run.ranks) <= 1 else ALL_RANKS


def module_tree(run: Run, rank: int | None = None) -> pd.DataFrame:
    """``module_tree`` of one rank, of the run's only rank, or of a job's ranks merged (``rank`` NULL)."""
    return _frame(run.con.execute(tree_query(rows_of(run, rank))).df(), ["module", "parent", "name"])


def module_calls(run: Run, rank: int | None = None) -> pd.DataFrame:
    """``module_calls`` (with each kernel's ``kernel_short`` name) of one rank, the only rank, or all merged."""
    define_kernel_short(run.con)
    query = f"SELECT *, kernel_short(kernel) AS kernel_short FROM ({module_calls_query(rows_of(run, rank))})"
    return _frame(run.con.execute(query).df(), ["module", "function_name", "kernel", "kernel_short"])


def inclusive_module_time(run: Run, top_k: int) -> pd.DataFrame:
    """Device time per module with its submodules (the root '' holds everything), most expensive first: what
    ``time_by("module_name")`` gives for the innermost module only."""
    if top_k < 0:
        raise ValueError("top_k must be >= 0")
    query = sql_template("tree_breakdown.sql").substitute(tree=tree_query(rows_of(run, None)), top_k=int(top_k))
    frame = _frame(run.con.execute(query).df(), ["module_name"])
    return frame.rename(columns={"kernels": "cpu_operators"}) if run.device == "cpu" else frame  # as time_by names it


def _frame(frame: pd.DataFrame, text_columns: list[str]) -> pd.DataFrame:
    for column in text_columns:  # missing names are None, as in profiling_df, never a float NaN
        values = frame[column].astype(object)
        frame[column] = values.where(values.notna(), None)
    return frame.astype({"rank": "Int32"}) if "rank" in frame else frame


def tree_nodes_query(run: Run, rank: int | None) -> str:
    """tree_nodes.sql over ``rank``'s rows (see rows_of); needs kernel_short (define_kernel_short)."""
    rows = rows_of(run, rank)
    return sql_template("tree_nodes.sql").substitute(tree=tree_query(rows), module_calls=module_calls_query(rows))


def shown_tree(
    run: Run, rank: int | None = None, *, min_pct: float = 1.0, max_depth: int | None = None, show_calls: bool = False
) -> pd.DataFrame:
    """What ``kernelscope tree`` prints (tree_shown.sql): the nodes of tree_nodes.sql the options keep, then per
    shown node a ``kind`` 'more' row for its children under ``min_pct`` percent (``folded`` of them)."""
    frame = run.con.execute(shown_tree_query(run, rank, min_pct=min_pct, max_depth=max_depth, show_calls=show_calls))
    return _frame(frame.df(), ["kind", "module", "function_name", "kernel", "label"]).astype(
        {"node_id": "Int64", "parent_id": "Int64", "kernels": "Int64", "tree_depth": "Int64", "folded": "Int64"}
    )


def shown_tree_query(
    run: Run, rank: int | None = None, *, min_pct: float = 1.0, max_depth: int | None = None, show_calls: bool = False
) -> str:
    """tree_shown.sql's query for these options; defines kernel_short on the run's connection."""
    if not (0 <= min_pct < math.inf):  # it is written into the query as a number, which inf and nan are not
        raise ValueError(f"min_pct must be a finite number >= 0, not {min_pct!r}")
    if max_depth is not None and max_depth < 0:
        raise ValueError("max_depth must be >= 0")
    define_kernel_short(run.con)
    return sql_template("tree_shown.sql").substitute(
        nodes=tree_nodes_query(run, rank),
        min_pct=repr(float(min_pct)),
        max_depth="NULL" if max_depth is None else str(int(max_depth)),
        show_calls="true" if show_calls else "false",
    )
