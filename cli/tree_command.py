"""``kernelscope tree``: the module hierarchy with each module's device time, its submodules' included."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import click

from .loading import check_rank, load_run_of, prefix_options, rank_option, run_option
from .numbers import PERCENT, ROWS
from .output import print_note, stdout_console
from .paths import UserPath
from .rows import root_name, run_label

if TYPE_CHECKING:  # loaded where a command runs: --help and usage errors need none of it
    import pandas as pd

STYLES = {"module": "bold", "call": "cyan", "kernel": "dim"}
UNBOUNDED = 1 << 20  # a width no tree line reaches: the widest line measured as it is


@click.command(short_help="The module tree, with each module's time.")
@click.argument("run", type=UserPath(path_type=str))
@click.option(
    "--min-pct",
    type=PERCENT,
    default=1.0,
    show_default=True,
    help="Fold the children under this share of the total device time into one '… N more' line.",
)
@click.option("--depth", type=ROWS, default=None, help="Print this many levels below the root.")
@click.option("--show-calls", is_flag=True, help="List under each module its calls, and under each call its kernels.")
@click.option("--full-names", is_flag=True, help="With --show-calls: kernels by their full names, not short ones.")
@rank_option
@run_option
@prefix_options
def tree(
    run: str,
    min_pct: float,
    depth: int | None,
    show_calls: bool,
    full_names: bool,
    rank: int | None,
    run_ref: str | None,
    module_prefix,
    function_prefix,
) -> None:
    """The module tree of RUN (a run, a job of ranks, a trace, or an archived run with --run ID): each module's
    device time with its submodules' (and its share of the total), children most expensive first; the root
    holds the kernels outside any module. The same numbers: view module_tree, Run.tree().

    \b
    Examples:
      kernelscope tree RUN
      kernelscope tree RUN --depth 2 --show-calls --min-pct 5
    """
    from kernelscope.analyzer.tree import shown_tree

    if full_names and not show_calls:  # the tree of modules names no kernel: the option would do nothing
        raise click.UsageError("--full-names names the kernels --show-calls lists: add --show-calls")
    with load_run_of(run, module_prefix, function_prefix, run_ref) as loaded:
        check_rank(run, loaded, rank)
        nodes = shown_tree(loaded, rank, min_pct=min_pct, max_depth=depth, show_calls=show_calls)
        name = root_name(run_label(run, run_ref, loaded), rank)  # an archived run by its id
        where = "" if rank is None else f" AND rank = {int(rank)}"
        in_modules = loaded.con.execute(f"SELECT count(*) FROM kernels WHERE module_name IS NOT NULL{where}").fetchone()
    print_tree(nodes, name, min_pct, full_names)
    if not in_modules[0] and not show_calls and depth != 0:  # the root's line alone, which says nothing of why
        print_note(
            "The trace names no module: all its time is the root's. --show-calls lists its calls; torch.profiler "
            "records modules with with_stack=True and with_modules=True, and kernelscope record scopes every module."
        )


def print_tree(nodes: pd.DataFrame, root_name: str, min_pct: float, full_names: bool = False) -> None:
    """``nodes`` (tree_shown.sql: parents before children, folded children last) as a rich tree on stdout."""
    import pandas as pd
    from rich.markup import escape
    from rich.tree import Tree

    from .printable import printable

    branches: dict[int, Tree] = {}
    root = None
    for node in nodes.itertuples(index=False):
        if node.kind == "more":
            label = f"[dim]{_times(node.time_us, node.share_pct)}  … {node.folded} more under {min_pct:g}%[/dim]"
            branches[node.parent_id].add(label)
            continue
        if node.parent_id is pd.NA:
            name = root_name
        else:
            name = node.kernel if full_names and node.kind == "kernel" else node.label
        name = escape(printable(name))  # plain text: no rich markup, no control characters
        label = f"{_times(node.time_us, node.share_pct)}  [{STYLES[node.kind]}]{name}[/]"
        if node.kind == "module" and node.own_us > 0 and node.own_us < node.time_us:
            label += f"  [dim](own {node.own_us:,.1f} µs)[/dim]"
        if node.kind == "kernel":
            label += f"  [dim]×{node.kernels}[/dim]"
        if node.parent_id is pd.NA:
            branches[node.node_id] = root = Tree(label)
        else:
            branches[node.node_id] = branches[node.parent_id].add(label)
    # One node per line, whatever the terminal's width: a name wrapped under its own line would part from its time
    # (grep, a pager) and leave the guides a line without a node; the terminal folds what is wider, as for a table.
    console = stdout_console(highlight=False)
    widest = console.measure(root, options=console.options.update_width(UNBOUNDED)).maximum
    if widest > console.width:
        console = stdout_console(highlight=False, width=widest)
    console.print(root)


def _times(time_us: float, share_pct: float) -> str:
    share = 0.0 if math.isnan(share_pct) else share_pct
    return f"{time_us:>9,.1f} µs {share:5.1f}%"
