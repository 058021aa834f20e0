"""kernelscope sql RUN QUERY prints a long result as DuckDB makes it, block by block: the first rows reach the reader
before the query has ended, and the blocks read as the whole result would."""

import io
import json
import subprocess
import sys
import time

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.cli import main

RUN = REPO / "sample_traces" / "mlp"
# 300,000 rows, each hashing 50 kB: over a minute for the whole result on two shared cores, seconds for its first
# rows. DuckDB computes ahead of the rows fetched, up to streaming_buffer_size (10 MiB, some 100,000 of these rows):
# here it is kept small, so that what is timed is kernelscope's printing, not DuckDB's read-ahead.
SLOW = "SET streaming_buffer_size = '1KB'; SELECT i, md5(repeat('x', 50000) || i) AS h FROM range(300000) t(i)"


@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_the_first_rows_of_a_long_result_are_printed_before_the_query_ends(fmt):
    """Before, the result was fetched whole, then every cell made a text: ``SELECT * FROM events`` of a 200 MB
    trace printed its first line after 35 s (3 s now, the trace's loading)."""
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "kernelscope.cli", "sql", str(RUN), SLOW, "--format", fmt],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        lines = [process.stdout.readline() for _ in range(4)]
        elapsed = time.monotonic() - started
        assert process.poll() is None, "the query is still running"
    finally:
        process.kill()
        process.wait()
    first_row = lines[3] if fmt == "table" else lines[1]
    assert b"0" in first_row and elapsed < 30, (lines, elapsed)


def test_the_prompt_shows_a_long_result_s_first_rows_before_it_counts_the_rest():
    """The prompt fetched a statement's whole result to show its first 200 rows (7 s of a 200 MB trace's events
    before the table); it shows them once fetched, then counts the rows it leaves out."""
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "kernelscope.cli", "sql", str(RUN)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        process.stdin.write(f"{SLOW};\n".encode())
        process.stdin.close()
        lines = [process.stdout.readline()]
        while lines[-1] and lines[-1].split()[:2] != ["│".encode(), b"0"]:  # SET's table, then the SELECT's
            lines.append(process.stdout.readline())
        elapsed = time.monotonic() - started
        assert process.poll() is None, "the rows left out are still being counted"
    finally:
        process.kill()
        process.wait()
    assert lines[-1] and elapsed < 30, (lines, elapsed)


def _block_query(rows: int) -> str:
    """A float column whole in the first rows and not after, a null, and a name that widens after the first
    block."""
    return (
        f"SELECT i, CASE WHEN i < 3000 THEN i * 1.0 ELSE i / 4 END AS x, CASE WHEN i = 7 THEN NULL ELSE i END AS n, "
        f"CASE WHEN i = {rows - 1} THEN repeat('w', 60) ELSE 'v' || i END AS name FROM range({rows}) t(i) ORDER BY i"
    )


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl"])
def test_a_result_printed_in_blocks_is_the_text_of_the_whole(fmt):
    from kernelscope.analyzer import load_run
    from kernelscope.output import render

    query = _block_query(40_000)
    result = CliRunner().invoke(main, ["sql", str(RUN), query, "--format", fmt])
    assert result.exit_code == 0, result.output
    with load_run(RUN) as run:
        whole = run.sql(query)
    assert result.stdout == render(whole, fmt)


def test_a_table_printed_in_blocks_shows_every_row_and_opens_a_wider_table_for_a_wider_value():
    query = _block_query(40_000)
    result = CliRunner().invoke(main, ["sql", str(RUN), query])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # x's first decimals (i / 4 from 3,000) and the 60-character name, last, each widen their column
    assert sum(line.startswith("┏") for line in lines) == 3
    rows = [[cell.strip() for cell in line.strip("│").split("│")] for line in lines if line.startswith("│")]
    frame = pd.DataFrame(rows, columns=["i", "x", "n", "name"])
    assert frame["i"].str.replace(",", "").astype(int).tolist() == list(range(40_000))
    assert frame.loc[7, "n"] == "-" and frame.loc[8, "n"] == "8"
    assert frame.loc[2, "x"] == "2" and frame.loc[3001, "x"] == "750.250", "decimals once a block needs them"
    assert frame.loc[39_999, "name"] == "w" * 60


def test_the_prompt_counts_the_rows_it_leaves_out():
    result = CliRunner().invoke(main, ["sql", str(RUN)], input="SELECT i FROM range(70000) t(i) ORDER BY i;\n")
    assert result.exit_code == 0 and "│ 199 │" in result.output and "│ 200 │" not in result.output
    assert result.output.strip().endswith("(69,800 more rows: add a LIMIT, or export with kernelscope sql ... -o FILE)")


def test_a_query_that_fails_while_its_rows_are_fetched_is_the_command_s_error():
    query = "SELECT CASE WHEN i < 900000 THEN i ELSE error('late failure') END AS i FROM range(1000000) t(i)"
    result = CliRunner().invoke(main, ["sql", str(RUN), query, "--format", "jsonl"])
    assert result.exit_code == 2
    assert result.output.startswith('{"i":0}\n{"i":1}\n'), "rows were printed before the failure came"
    assert result.output.strip().endswith("kernelscope: error: the query failed: Invalid Input Error: late failure")
    assert "Traceback" not in result.output


def test_stdout_json_of_a_long_result_is_one_array():
    result = CliRunner().invoke(main, ["sql", str(RUN), "SELECT i FROM range(5000) t(i) ORDER BY i", "--json"])
    assert json.load(io.StringIO(result.stdout)) == [{"i": i} for i in range(5000)]
