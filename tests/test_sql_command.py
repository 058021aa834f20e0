"""kernelscope sql: the interactive prompt (no query) and the database kept with -o FILE.duckdb."""

import duckdb
from click.testing import CliRunner
from conftest import REPO
from kernelscope.analyzer import load_run
from kernelscope.cli import main

RUN = REPO / "sample_traces" / "mlp"


def test_the_prompt_runs_statements_until_quit():
    script = "SELECT count(*) AS n\n  FROM kernels;\nSELECT nope;\n.tables\nSELECT 41 + 1 AS answer;\n.quit\n"
    script += "SELECT 7;\n"
    result = CliRunner().invoke(main, ["sql", str(RUN)], input=script)
    assert result.exit_code == 0, result.output
    assert "│ 6 │" in result.output, "a statement over two lines"
    assert "error: Binder Error" in result.output, "a failing statement prints its error and the prompt goes on"
    assert "events  kernels  module_calls  module_tree  sample_costs  sample_totals  samples  summary" in result.output
    assert "42" in result.output and "│ 7 │" not in result.output, ".quit stops reading"


def test_end_of_input_runs_the_last_statement_without_semicolon():
    result = CliRunner().invoke(main, ["sql", str(RUN)], input="SELECT 5 * 5 AS x")
    assert result.exit_code == 0 and "25" in result.output


def test_o_duckdb_keeps_the_database(tmp_path):
    target = tmp_path / "run.duckdb"
    result = CliRunner().invoke(main, ["sql", str(RUN), "-o", str(target)])
    assert result.exit_code == 0 and [p.name for p in tmp_path.iterdir()] == ["run.duckdb"]
    con = duckdb.connect(str(target), read_only=True)
    with load_run(RUN) as run:
        for table in ("events", "kernels", "samples", "sample_totals", "summary"):
            kept = con.execute(f"SELECT * FROM {table}").df()
            assert kept.equals(run.sql(f"SELECT * FROM {table}")), table
    con.close()
    refused = CliRunner().invoke(main, ["sql", str(RUN), "-o", str(target), "SELECT 1"])
    assert refused.exit_code == 2 and "already exists" in refused.output
    replaced = CliRunner().invoke(main, ["sql", str(RUN), "-o", str(target), "--force", "SELECT 3 AS three"])
    assert replaced.exit_code == 0 and "three" in replaced.output
