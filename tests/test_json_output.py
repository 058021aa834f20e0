"""cli/json_output.py: --format json and jsonl write every type a query of kernelscope sql can give."""

import json

import pytest
from conftest import REPO
from test_hostile_input import _in_process

RUN = REPO / "sample_traces" / "mlp"
QUERY = (
    "SELECT [5] AS one, [1, NULL] AS two, [[1], []] AS nested, {'a': [1.5]} AS struct, MAP {'k': 1} AS map, "
    "'a\\x00\\xFF\\x5C'::BLOB AS blob, INTERVAL 1 DAY AS span"
)
EXPECTED = {
    "one": [5],
    "two": [1, None],
    "nested": [[1], []],
    "struct": {"a": [1.5]},
    "map": {"k": 1},
    "blob": "a\\x00\\xFF\\x5C",
    "span": "1 days 00:00:00",
}


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_lists_blobs_and_intervals_are_json(fmt):
    """A LIST column failed with a traceback ('can only convert an array of size 1 to a Python scalar'), or, of one
    element, was written as that element ([5] as 5); a BLOB or an INTERVAL failed ('Type is not JSON serializable')."""
    done = _in_process("sql", RUN, QUERY, "--format", fmt)
    assert done.exit_code == 0, done.output
    rows = json.loads(done.stdout) if fmt == "json" else [json.loads(line) for line in done.stdout.splitlines()]
    assert rows == [EXPECTED]


def test_a_map_of_number_keys_is_json():
    """orjson writes only text keys: a MAP {1: 2} failed with 'TypeError: Dict key must be str'."""
    done = _in_process("sql", RUN, "SELECT MAP {1: 2} AS m", "--format", "json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == [{"m": {"1": 2}}]


def test_csv_and_tables_show_lists_and_blobs_as_text_not_numpys_repr():
    """CSV and tables wrote pandas' repr of the arrays: '[array([1], dtype=int32) array([2, 3], dtype=int32)]' for
    [[1], [2, 3]], 'bytearray(b'\\xff')' for a BLOB."""
    query = "SELECT [[1], [2, 3]] AS nested, '\\xFF'::BLOB AS blob, ['x,y'] AS comma, 'plain' AS text"
    csv = _in_process("sql", RUN, query, "--format", "csv")
    assert csv.exit_code == 0, csv.output
    assert csv.stdout.splitlines() == ["nested,blob,comma,text", '"[[1],[2,3]]",\\xFF,"[""x,y""]",plain']
    table = _in_process("sql", RUN, query)
    assert table.exit_code == 0, table.output
    assert "[[1],[2,3]]" in table.stdout and "\\xFF" in table.stdout and "array(" not in table.stdout
