"""The module tree (tree.sql, module_calls.sql, tree_nodes.sql, tree_shown.sql; `kernelscope tree`), each number
checked against sums over profiling_df computed here, row by row, on every sample run and trace."""

import json
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import REPO, SAMPLE_RUNS, SHARED_TRACES, make_job
from kernelscope.analyzer import BadInputError, archive_runs, load_run
from kernelscope.analyzer.tree import inclusive_module_time, module_calls, shown_tree
from kernelscope.cli import main

EXTERNAL = sorted((REPO / "sample_traces" / "external").glob("*.json*"))
SOURCES = SAMPLE_RUNS + SHARED_TRACES + EXTERNAL


def _prefixes(module: str) -> list[str]:
    """The module and its ancestors, the root '' first, the way the hierarchy's dotted names nest."""
    parts = module.split(".") if module else []
    return [".".join(parts[:depth]) for depth in range(len(parts) + 1)]


def expected_tree(frame: pd.DataFrame) -> dict:
    """{module: (inclusive_us, own_us, kernels, functions)} of one rank's rows, summed row by row."""
    inclusive, own, kernels, functions = defaultdict(float), defaultdict(float), defaultdict(int), defaultdict(set)
    for row in frame.itertuples(index=False):
        module = row.module_name if isinstance(row.module_name, str) else ""
        own[module] += row.kernel_us
        for prefix in _prefixes(module):
            inclusive[prefix] += row.kernel_us
            kernels[prefix] += 1
            if isinstance(row.function_name, str):
                functions[prefix].add(row.function_name)
    return {m: (inclusive[m], own[m], kernels[m], len(functions[m])) for m in inclusive}


def assert_tree_matches(tree: pd.DataFrame, frame: pd.DataFrame) -> None:
    expected = expected_tree(frame)
    tree = tree.assign(parent=tree["parent"].astype(object).where(tree["parent"].notna(), None))
    assert sorted(tree["module"]) == sorted(expected), "one row per module prefix, none missing, none invented"
    total = frame["kernel_us"].sum()
    root = tree[tree["module"] == ""].iloc[0]
    assert root["parent"] is None and root["depth"] == 0
    assert root["inclusive_us"] == pytest.approx(total, rel=1e-12, abs=1e-9), "the root holds every row"
    for row in tree.itertuples(index=False):
        inclusive, own, kernels, functions = expected[row.module]
        assert row.inclusive_us == pytest.approx(inclusive, rel=1e-12, abs=1e-9), row.module
        assert row.own_us == pytest.approx(own, rel=1e-12, abs=1e-9), row.module
        assert (row.kernels, row.functions) == (kernels, functions), row.module
        assert row.share_pct == pytest.approx(100.0 * inclusive / total if total else 0.0, rel=1e-9, abs=1e-9)
        if row.module:
            assert row.parent == _prefixes(row.module)[-2] and row.depth == len(_prefixes(row.module)) - 1
            assert row.name == row.module.split(".")[-1]
    position = {module: i for i, module in enumerate(tree["module"])}
    assert all(position[p] < position[m] for m, p in zip(tree["module"], tree["parent"], strict=True) if p is not None)
    for _, siblings in tree[tree["parent"].notna()].groupby("parent"):
        times = list(siblings["inclusive_us"])
        assert times == sorted(times, reverse=True), "children most expensive first"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name if p.parent.name != "sample_traces" else p.stem)
def test_every_node_is_the_sum_over_its_subtree(source):
    try:
        loaded = load_run(source)
    except BadInputError as exc:  # a trace from another project that the loader refuses has no tree to check
        assert source in EXTERNAL, exc
        pytest.skip(f"the analyzer refuses it: {exc}")
    with loaded as run:
        frame = run.profiling_df()
        view = run.sql("SELECT * FROM module_tree")
        for rank in run.ranks:
            assert_tree_matches(view[view["rank"] == rank].reset_index(drop=True), frame[frame["rank"] == rank])
        api = run.tree()
        assert list(api.columns) == list(view.columns) and len(api) == len(view)
        calls = module_calls(run)
    _assert_calls_match(calls, frame)


def _assert_calls_match(calls: pd.DataFrame, frame: pd.DataFrame) -> None:
    """module_calls: per module (NULL: the root's) and call, and per kernel of it, the rows' time and count."""
    rows = frame.assign(module=frame["module_name"].fillna(""), call=frame["function_name"].fillna("\0"))
    per_call = rows.groupby(["module", "call"])["kernel_us"].agg(["sum", "size"])
    per_kernel = rows.groupby(["module", "call", "kernel"])["kernel_us"].agg(["sum", "size"])
    shown = calls.assign(call=calls["function_name"].fillna("\0"))
    call_rows, kernel_rows = shown[shown["kernel"].isna()], shown[shown["kernel"].notna()]
    assert len(call_rows) == len(per_call) and len(kernel_rows) == len(per_kernel)
    for row in call_rows.itertuples(index=False):
        assert (row.time_us, row.kernels) == (
            pytest.approx(per_call.loc[(row.module, row.call), "sum"]),
            per_call.loc[(row.module, row.call), "size"],
        )
    for row in kernel_rows.itertuples(index=False):
        expected = per_kernel.loc[(row.module, row.call, row.kernel)]
        assert (row.time_us, row.kernels) == (pytest.approx(expected["sum"]), expected["size"])


@pytest.fixture(scope="module")
def bert():
    with load_run(REPO / "sample_traces" / "bert") as run:
        yield run


def test_the_nodes_of_a_module_add_up_to_it_submodules_and_calls_alike(bert):
    nodes = shown_tree(bert, min_pct=0, show_calls=True)
    assert nodes["kind"].value_counts().to_dict().keys() == {"module", "call", "kernel"}
    children = nodes.groupby("parent_id")["time_us"].sum()
    for node in nodes[nodes["node_id"].isin(children.index)].itertuples(index=False):
        assert children[node.node_id] == pytest.approx(node.time_us), (node.kind, node.label)
    assert list(nodes["node_id"]) == list(range(1, len(nodes) + 1)), "depth first, no gap"
    assert (nodes["parent_id"].dropna() < nodes.loc[nodes["parent_id"].notna(), "node_id"]).all()
    kernels = nodes[nodes["kind"] == "kernel"]
    assert kernels["kernels"].sum() == len(bert.profiling_df()), "every row is under one kernel leaf"
    assert kernels["label"].str.len().max() < kernels["kernel"].str.len().max(), "kernel leaves are short names"


@pytest.mark.parametrize("min_pct,depth", [(1.0, None), (5.0, 3), (0.0, 2), (50.0, None)])
def test_folding_keeps_a_tree_and_accounts_for_what_it_hides(bert, min_pct, depth):
    everything = shown_tree(bert, min_pct=0, show_calls=True)
    shown = shown_tree(bert, min_pct=min_pct, max_depth=depth, show_calls=True)
    nodes, more = shown[shown["kind"] != "more"], shown[shown["kind"] == "more"]
    ids = set(nodes["node_id"])
    assert nodes["parent_id"].dropna().isin(ids).all(), "every shown node's parent is shown"
    assert (nodes.loc[nodes["parent_id"].notna(), "share_pct"] >= min_pct).all()
    if depth is not None:
        assert nodes["tree_depth"].max() <= depth
    for parent in ids:
        children = everything[(everything["parent_id"] == parent) & (everything["tree_depth"] <= (depth or 99))]
        hidden = children[~children["node_id"].isin(ids)]
        folded = more[more["parent_id"] == parent]
        if hidden.empty:
            assert folded.empty
        else:
            assert (hidden["share_pct"] < min_pct).all()
            assert folded["folded"].item() == len(hidden)
            assert folded["time_us"].item() == pytest.approx(hidden["time_us"].sum())


def test_a_job_has_a_tree_per_rank_and_one_merged(tmp_path):
    job = make_job(tmp_path / "job", {0: REPO / "sample_traces" / "demo", 1: REPO / "sample_traces" / "mlp"})
    with load_run(job) as run:
        frame = run.profiling_df()
        merged, zero, one = run.tree(), run.tree(rank=0), run.tree(rank=1)
        with pytest.raises(ValueError, match=r"has no rank 7 \(its ranks: 0, 1\)"):
            run.tree(rank=7)
    assert merged["rank"].isna().all() and set(zero["rank"]) == {0} and set(one["rank"]) == {1}
    assert_tree_matches(zero, frame[frame["rank"] == 0])
    assert_tree_matches(one, frame[frame["rank"] == 1])
    assert_tree_matches(merged, frame)
    result = CliRunner().invoke(main, ["tree", str(job), "--rank", "1", "--min-pct", "0"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"{job} (rank 1)" in result.output and "encoder" not in result.output  # demo's, rank 0's only
    result = CliRunner().invoke(main, ["tree", str(job), "--rank", "5"])
    assert result.exit_code == 2 and "(its ranks: 0, 1)" in result.output


def test_tree_of_an_archived_run_is_the_runs_tree(tmp_path):
    source = REPO / "sample_traces" / "demo"
    [(run_id, _)] = archive_runs([source], tmp_path / "archive")
    direct = CliRunner().invoke(main, ["tree", str(source), "--show-calls"], catch_exceptions=False)
    archived = CliRunner().invoke(main, ["tree", str(tmp_path / "archive"), "--run", run_id, "--show-calls"])
    assert archived.exit_code == 0, archived.output
    assert archived.output.splitlines()[1:] == direct.output.splitlines()[1:], "the same tree below the root's name"
    by_name = CliRunner().invoke(main, ["tree", str(tmp_path / "archive"), "--run", "demo"])
    assert f"{tmp_path / 'archive'} --run {run_id}" in by_name.output.splitlines()[0], "the run picked, by its id"
    whole = CliRunner().invoke(main, ["tree", str(tmp_path / "archive")])
    assert whole.exit_code == 2 and "--run ID" in whole.output


def test_the_command_prints_the_tree_folded_and_cut():
    run = REPO / "sample_traces" / "demo"
    lines = CliRunner().invoke(main, ["tree", str(run)], catch_exceptions=False).output.splitlines()
    assert lines[0] == f"    105.6 µs 100.0%  {run}  (own 13.9 µs)"
    assert "├──      47.4 µs  44.9%  encoder  (own 5.7 µs)" in lines
    assert any("self_attn" in line for line in lines) and not any("layer_norm" in line for line in lines)
    cut = CliRunner().invoke(main, ["tree", str(run), "--depth", "1", "--min-pct", "20"]).output
    assert "encoder" in cut and "self_attn" not in cut and "more under 20%" in cut
    calls = CliRunner().invoke(main, ["tree", str(run), "--show-calls", "--min-pct", "0"]).output
    assert "scaled_dot_product_attention" in calls and "vectorized_layer_norm_kernel  ×2" in calls
    full = CliRunner().invoke(main, ["tree", str(run), "--show-calls", "--min-pct", "0", "--full-names"]).output
    assert "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half" in full


def test_a_narrow_terminal_keeps_each_node_on_one_line():
    """A node's time and name stay on one line however narrow the terminal (a full kernel name of 900 characters,
    a root named by its path): the tree is the one a wide terminal gets, never a name parted from its time."""
    args = ["tree", str(REPO / "sample_traces" / "demo"), "--show-calls", "--min-pct", "0", "--full-names"]
    wide = CliRunner(env={"COLUMNS": "4000"}).invoke(main, args, catch_exceptions=False).output.splitlines()
    narrow = CliRunner(env={"COLUMNS": "40"}).invoke(main, args, catch_exceptions=False).output.splitlines()
    assert narrow == wide
    assert all(" µs " in line for line in narrow), "every line is a node with its time"
    assert max(map(len, narrow)) > 800, "the longest kernel name is there whole"


def test_analyze_by_module_inclusive_reads_the_tree(bert):
    frame = inclusive_module_time(bert, 0)
    tree = bert.tree()
    assert len(frame) == len(tree) and frame["time_spent_us"].iloc[0] == pytest.approx(tree["inclusive_us"].iloc[0])
    assert list(frame["time_spent_us"]) == sorted(frame["time_spent_us"], reverse=True)
    assert len(inclusive_module_time(bert, 3)) == 3
    result = CliRunner().invoke(
        main, ["analyze", str(bert.path), "--by", "module_name", "--inclusive", "--format", "csv", "--top-k", "3"]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "module_name,kernels,time_spent_us,time_spent_pct,own_us"
    assert [line.split(",")[0] for line in lines[1:]] == ["", "encoder", "encoder.layer"]
    refused = CliRunner().invoke(main, ["analyze", str(bert.path), "--by", "kernel", "--inclusive"])
    assert refused.exit_code == 2 and "--inclusive" in refused.output


def test_odd_module_names_still_nest(tmp_path):
    """Empty components and names that prefix others without a dot: the tree follows the dots exactly."""
    import duckdb
    from kernelscope.analyzer.tree import tree_query

    con = duckdb.connect()
    frame = pd.DataFrame(
        {
            "rank": [0] * 6,
            "module_name": ["a", "ab", "a..b", "a.", None, ""],
            "function_name": ["f", None, "g", "f", None, None],
            "kernel_us": [1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
        }
    )
    con.register("kernels", frame.astype({"rank": "int32"}))
    tree = con.execute(tree_query()).df()
    assert_tree_matches(tree, frame)
    assert tree.loc[tree["module"] == "a", "inclusive_us"].item() == 1.0 + 4.0 + 8.0, "a, a. and a..b; not ab"
    assert tree.loc[tree["module"] == "a.", "parent"].item() == "a"


def test_a_cpu_recordings_inclusive_breakdown_has_the_columns_of_by(demo_run):
    """--by module_name --inclusive is "the columns of --by, plus own_us" (docs/report.md): on a CPU recording the
    count is cpu_operators there, and was kernels here."""
    out = str(demo_run[-1])
    by = CliRunner().invoke(main, ["analyze", out, "--by", "module_name", "--format", "csv"]).output.splitlines()[0]
    inclusive = CliRunner().invoke(main, ["analyze", out, "--by", "module_name", "--inclusive", "--format", "csv"])
    assert (
        inclusive.output.splitlines()[0]
        == by + ",own_us"
        == "module_name,cpu_operators,time_spent_us,time_spent_pct,own_us"
    )


def test_the_footer_points_to_the_rows_unless_it_is_under_them(demo_run):
    out = str(demo_run[-1])
    summary = CliRunner().invoke(main, ["analyze", out]).output.splitlines()[-1]
    rows = CliRunner().invoke(main, ["analyze", out, "--kernels"]).output.splitlines()[-1]
    assert summary.endswith("outside any (see --kernels).") and rows.endswith("outside any.")


def _first_cells(output: str) -> list[str]:
    """The first cell of each row of a printed table."""
    return [line.split("│")[1].strip() for line in output.splitlines() if line.startswith("│")]


def _invoke(*arguments) -> str:
    """The command's output, its tables as wide as they need (no name folded over lines)."""
    return CliRunner(env={"COLUMNS": "400"}).invoke(main, [str(a) for a in arguments], catch_exceptions=False).output


def test_tables_name_the_root_module_and_files_keep_its_empty_name(tmp_path):
    run = str(REPO / "sample_traces" / "demo")  # its root module runs kernels of its own
    assert _invoke("tree", run).splitlines()[0].split("%  ")[1].startswith(f"{run}  (own "), "the tree's top line"
    inclusive = ["--by", "module_name", "--inclusive"]
    assert _first_cells(_invoke("analyze", run, *inclusive))[0] == "(root)"
    assert _invoke("analyze", run, *inclusive, "--format", "csv").splitlines()[1].startswith(",52,")
    diff = _invoke("diff", run, run, "--level", "module").splitlines()
    rows = [[cell.strip() for cell in line.split("│")[1:3]] for line in diff if line.startswith("│")]
    assert rows[1] == ["module", "(root)"]
    rows = json.loads(_invoke("diff", run, run, "--format", "json"))
    assert [row["name"] for row in rows if row["level"] == "module"][0] == ""
    query = "SELECT module_name FROM kernels WHERE module_name = '' LIMIT 1"
    assert _first_cells(_invoke("sql", run, query)) == ["(root)"]
    assert _invoke("sql", run, query, "--format", "csv") == 'module_name\n""\n'
    job = make_job(tmp_path / "job", {0: Path(run), 1: Path(run)})
    assert _first_cells(_invoke("analyze", job, *inclusive, "--rank", "1"))[0] == "(root)"


def test_tables_name_the_root_module_where_rows_outside_any_module_share_the_column():
    """A column that also holds NULL (kernels outside any module: a generate loop's argmax, another thread's work) is
    no string dtype to pandas: the root's "" was left a blank cell there."""
    run = str(REPO / "sample_traces" / "threads")  # rows of the root module and rows of no module
    assert "(root)" in _first_cells(_invoke("analyze", run, "--by", "module_name"))
    assert "(root)" in _first_cells(_invoke("analyze", run, "--kernels", "--top-k", "0"))
    shown = _first_cells(_invoke("sql", run, "SELECT DISTINCT module_name FROM kernels ORDER BY 1 NULLS LAST"))
    assert shown == ["(root)", "linear", "-"]


def test_a_tree_without_modules_says_why_it_is_one_line():
    """A plain trace that records no module printed the root's line alone: nothing said why, nor what shows more."""
    trace = REPO / "sample_traces" / "plain_kineto" / "with_stack.json.gz"
    lines = _invoke("tree", trace).splitlines()
    assert len(lines) == 2 and lines[0].endswith(str(trace)), lines
    assert lines[1] == (
        "The trace names no module: all its time is the root's. --show-calls lists its calls; torch.profiler records "
        "modules with with_stack=True and with_modules=True, and kernelscope record scopes every module."
    )
    assert "names no module" not in _invoke("tree", trace, "--show-calls"), "the calls are the answer"
    assert "names no module" not in _invoke("tree", REPO / "sample_traces" / "demo", "--depth", "0")
