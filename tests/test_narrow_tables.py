"""A table on a terminal too narrow for it, even with its headers and names folded: the columns that do not fit are
left out from the right, and a line names them, where every line of a wider table wrapped over two."""

from click.testing import CliRunner
from conftest import REPO
from kernelscope.cli import main

DEMO = str(REPO / "sample_traces" / "demo")
MLP = str(REPO / "sample_traces" / "mlp")


def table_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line[:1] in "┏┃┡│└"]


def test_a_table_too_wide_for_80_columns_leaves_its_last_columns_out_and_says_which():
    for args, left_out in [
        (["analyze", DEMO, "--kernels", "--top-k", "3"], "call_op, kind, stream, sample_id, start_us, call_event_id"),
        (["diff", DEMO, MLP, "--top-k", "1"], "share_a_pct, share_b_pct, calls_a, calls_b"),
        (["analyze", DEMO, "--by-rank"], "tensor_size_MB"),
    ]:
        result = CliRunner().invoke(main, args, env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        table = table_lines(result.stdout)
        assert max(map(len, table)) <= 80, args
        assert f"left out to fit 80 columns: {left_out}" in " ".join(result.stdout.split()), args
        assert all(name not in "".join(table[:5]) for name in left_out.split(", ")), args


def test_a_table_that_fits_leaves_nothing_out_and_files_keep_every_column(tmp_path):
    fits = CliRunner().invoke(main, ["analyze", DEMO, "--top-k", "3"], env={"COLUMNS": "80"})
    assert fits.exit_code == 0 and "left out" not in fits.stdout
    wide = CliRunner().invoke(main, ["analyze", DEMO, "--kernels", "--top-k", "3"], env={"COLUMNS": "200"})
    assert wide.exit_code == 0 and "left out" not in wide.stdout and "┃ rank ┃" in wide.stdout
    to_file = ["analyze", DEMO, "--kernels", "-o", str(tmp_path / "k.txt")]
    assert CliRunner().invoke(main, to_file, env={"COLUMNS": "80"}).exit_code == 0
    assert "call_event_id" in (tmp_path / "k.txt").read_text()


def test_the_sql_prompt_says_to_select_fewer_columns():
    result = CliRunner().invoke(main, ["sql", DEMO], input="SELECT * FROM kernels LIMIT 2;\n", env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(map(len, table_lines(result.stdout))) <= 80
    assert "left out to fit 80 columns: " in result.stdout and "; select fewer to see them" in result.stdout


def test_an_identifier_is_never_folded_over_lines_on_a_narrow_terminal(tmp_path):
    """A run id folded over two lines ("run-2ffdc7c57a9" / "f") cannot be copied into --run or diff: an id column
    keeps its whole width, as a number does, and the columns that then do not fit are left out."""
    from kernelscope.analyzer import archive_runs

    path = tmp_path / "arch"
    ids = [run_id for run_id, _ in archive_runs([REPO / "sample_traces" / "mlp", DEMO], path)]
    result = CliRunner().invoke(main, ["runs", str(path)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    table = table_lines(result.stdout)
    assert max(map(len, table)) <= 80
    for run_id in ids:
        assert any(run_id in line for line in table), (run_id, result.stdout)


def test_a_long_table_fits_the_terminal_too():
    """A table of 1,000 rows or more (long_table.py, drawn without rich's layout) ignored the terminal's width: in 80
    columns `analyze maskrcnn --kernels --top-k 0` was 299 characters wide and `sql … "SELECT * FROM kernels"` 2,037
    (a kernel's full name on one line). Its names now fold, its headers break, and the columns that still do not fit
    are left out and named, as in a shorter table; its rows are all there."""
    maskrcnn = str(REPO / "sample_traces" / "maskrcnn")
    for args, left_out in [
        (["analyze", maskrcnn, "--kernels", "--top-k", "0"], "left out to fit 80 columns: call_op, kind, "),
        (["sql", maskrcnn, "SELECT * FROM kernels"], "left out to fit 80 columns: call_op, kind, "),
    ]:
        result = CliRunner().invoke(main, args, env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        table = table_lines(result.stdout)
        assert max(map(len, table)) <= 80, (args, max(map(len, table)))
        assert left_out in result.stdout, args
        rows = [line for line in table if line.startswith("│") and line.split("│")[5].strip()]  # kernel_us: whole
        assert len(rows) == 6952, (args, len(rows))
        assert any(line.startswith("┃ module_name ") for line in table[1:4]) and table[-1].startswith("└"), table[:4]


def test_a_long_table_of_wide_characters_fits_by_their_cells(capsys, monkeypatch):
    """A name of CJK characters is two cells a character: folded by its length it would overflow its column."""
    import pandas as pd
    from kernelscope.output import print_table
    from rich.cells import cell_len

    monkeypatch.setenv("COLUMNS", "50")
    names = ["層" * (i % 30) + f"_{i}" for i in range(1200)]
    print_table(pd.DataFrame({"module_name": names, "kernel": names, "kernel_us": [i / 3 for i in range(1200)]}))
    table = table_lines(capsys.readouterr().out)
    assert len(table) > 1200 and max(map(cell_len, table)) <= 50


def test_every_line_under_a_table_fits_80_columns_too(tmp_path):
    """The footer ("52 device rows, 105.6 µs in all; 100.0% inside a named call, 0.0% outside any (see --kernels).",
    94 characters), the columns left out (116), diff's rows left out (85) ran past an 80-column terminal, which broke
    them inside a word: each now wraps at a space, its words all there."""
    from kernelscope.analyzer import archive_runs
    from rich.cells import cell_len

    archive_runs([MLP, DEMO], tmp_path / "arch")
    job = str(REPO / "sample_traces" / "tensor_parallel_nccl1")
    for args, words in [
        (["analyze", DEMO], "100.0% inside a named call, 0.0% outside any (see --kernels)."),
        (["analyze", DEMO, "--kernels"], "left out to fit 80 columns: call_op, kind, stream, sample_id, start_us"),
        (["analyze", job, "--by-rank"], "0.0% outside any (see --kernels)."),
        (["diff", DEMO, MLP], "10 of 12 function, 10 of 19 module, 10 of 22 kernel rows shown; --top-k 0 shows all."),
        (["runs", str(tmp_path / "arch")], "left out to fit 80 columns: "),
    ]:
        result = CliRunner().invoke(main, args, env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert max(map(cell_len, lines)) <= 80, [line for line in lines if cell_len(line) > 80]
        assert words in " ".join(result.stdout.split()), (args, result.stdout)
    wide = CliRunner().invoke(main, ["analyze", DEMO], env={"COLUMNS": "200"})
    assert "100.0% inside a named call, 0.0% outside any (see --kernels).\n" in wide.stdout  # one line where it fits


def test_a_streamed_table_whose_later_rows_are_wider_still_fits_and_says_what_it_left_out():
    """`kernelscope sql` prints a long result block by block, and chose the columns that fit on the first block: a
    later block of wider numbers opened a table 120 characters wide in 80 columns, with no line saying so. The
    columns that no longer fit are left out from the row where they stop fitting, and the line under the table
    names them and that row."""
    query = (
        "SELECT i AS a, i AS b, i AS c, i AS d, i AS e, CASE WHEN i >= 3000 THEN 1e12 + i ELSE i END AS f, "
        "CASE WHEN i >= 3000 THEN 1e12 + i ELSE i END AS g, i AS h FROM range(5000) t(i)"
    )
    result = CliRunner().invoke(main, ["sql", DEMO, query], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    table = table_lines(result.stdout)
    assert max(map(len, table)) <= 80, max(map(len, table))
    rows = [line.split("│")[1].strip() for line in table if line.startswith("│")]
    assert rows == [f"{i:,}" for i in range(5000)]
    assert all(len(line.split("│")) == 10 for line in table if line.startswith("│ 2,047 "))  # the first block whole
    note = " ".join(result.stdout.split("┘\n")[-1].split())
    assert note.startswith("left out to fit 80 columns: "), result.stdout[-500:]
    assert "; --format csv shows them" in note and "from row 2,049" in note, note
