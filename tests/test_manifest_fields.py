"""Fields of a run directory's manifest and sample store read without a check of their type and range before:
each bad value is one line from the CLI naming the file and the field, exit code 2 (docs/errors.md)."""

import pytest
from test_bad_input import _copy_of_run, _edit_json, _set_in
from test_hostile_input import _in_process


def _shape(shape):
    def change(doc):
        doc["functions"]["linear"][0]["args"]["tuple"][0]["tensor"]["shape"] = shape

    return change


CASES = {
    "warmup_iterations a word": (
        "manifest.json",
        _set_in(["warmup_iterations"], "three"),
        'has warmup_iterations "three", not an integer from 0 to 2147483647',
    ),
    "warmup_iterations true": (
        "manifest.json",
        _set_in(["warmup_iterations"], True),
        "has warmup_iterations true, not an integer from 0 to 2147483647",
    ),
    "samples_per_pass negative": (
        "manifest.json",
        _set_in(["samples_per_pass"], -4),
        "has samples_per_pass -4, not an integer from 0 to 2147483647",
    ),
    "samples_per_pass a float": (
        "manifest.json",
        _set_in(["samples_per_pass"], 1.5),
        "has samples_per_pass 1.5, not an integer from 0 to 2147483647",
    ),
    "a shape of -1": (
        "samples.json",
        _shape([-1, 2]),
        "has a malformed sample 0 of function 'linear' (a tensor needs integer lists shape (sizes from 0 to",
    ),
    "a shape past 2**63": (
        "samples.json",
        _shape([2**64, 2]),
        "has a malformed sample 0 of function 'linear' (a tensor needs integer lists shape (sizes from 0 to",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_bad_field_is_one_line_naming_the_file_and_the_field(case, tmp_path):
    name, change, problem = CASES[case]
    run = _copy_of_run(tmp_path, _edit_json(name, change))
    done = _in_process("analyze", run)
    assert done.exit_code == 2 and isinstance(done.exception, SystemExit), done.exception
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"kernelscope: error: {run}/{name}: {problem}"), line
