"""The shared output switches: every format, the extension rule, atomic writes, no overwrite without --force."""

import json

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.cli import main

RUN = REPO / "sample_traces" / "mlp"
QUERY = "SELECT kernel, kernel_us, function_name FROM kernels ORDER BY event_id"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def expected():
    from kernelscope.analyzer import load_run

    with load_run(RUN) as run:
        return run.sql(QUERY)


@pytest.mark.parametrize("name", ["k.csv", "k.json", "k.jsonl", "k.ndjson", "k.parquet"])
def test_the_extension_picks_the_format_and_every_format_round_trips(name, tmp_path, expected):
    target = tmp_path / name
    result = invoke("sql", RUN, QUERY, "-o", target)
    assert result.exit_code == 0, result.output
    assert result.output == "" and [p.name for p in tmp_path.iterdir()] == [name], "no temporary file left"
    if name.endswith(".csv"):
        back = pd.read_csv(target)
    elif name.endswith(".json"):
        back = pd.DataFrame(json.loads(target.read_text()))  # one document: json.load reads it
    elif name.endswith(("l", ".ndjson")):
        back = pd.DataFrame([json.loads(line) for line in target.read_text().splitlines()])
    else:
        back = duckdb.connect().execute(f"SELECT * FROM read_parquet('{target}')").df()
    assert list(back.columns) == list(expected.columns) and len(back) == len(expected)
    assert back["kernel_us"].tolist() == pytest.approx(expected["kernel_us"].tolist())
    assert back["kernel"].tolist() == expected["kernel"].tolist()


def test_format_flag_wins_over_the_extension(tmp_path):
    target = tmp_path / "summary.txt"
    assert invoke("analyze", RUN, "--format", "csv", "-o", target).exit_code == 0
    assert target.read_text().startswith("function_name,calls,")


def test_an_existing_output_is_refused_without_force_and_replaced_with_it(tmp_path):
    target = tmp_path / "summary.csv"
    target.write_text("precious\n")
    refused = invoke("analyze", RUN, "-o", target)
    assert refused.exit_code == 2 and "already exists" in refused.output and "--force" in refused.output
    assert target.read_text() == "precious\n"
    assert invoke("analyze", RUN, "-o", target, "--force").exit_code == 0
    assert target.read_text().startswith("function_name,")


def test_parquet_needs_a_file():
    result = invoke("sql", RUN, QUERY, "--format", "parquet")
    assert result.exit_code == 2 and "needs -o FILE" in result.output


def test_csv_and_json_to_stdout(expected):
    csv = invoke("sql", RUN, QUERY, "--format", "csv")
    assert csv.exit_code == 0 and len(csv.output.strip().splitlines()) == len(expected) + 1
    document = json.loads(invoke("sql", RUN, QUERY, "--format", "json").output)
    assert [row["kernel"] for row in document] == expected["kernel"].tolist()
    lines = invoke("sql", RUN, QUERY, "--format", "jsonl").output.strip().splitlines()
    assert [json.loads(line)["kernel"] for line in lines] == expected["kernel"].tolist()
