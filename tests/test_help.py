"""Every command's --help, a new user's first read: a one-line summary in the command list (not cut with ...),
examples to copy, and lines that fit an 80-column terminal."""

import pytest
from click.testing import CliRunner
from kernelscope.cli import main

COMMANDS = sorted(main.commands)


def help_of(*args: str) -> str:
    result = CliRunner().invoke(main, [*args, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_command_list_says_what_each_does_whole_and_where_to_start():
    text = help_of()
    listed = text[text.index("Commands:") :].splitlines()[1:]
    assert [line.split()[0] for line in listed if line.strip()] == COMMANDS
    assert not any(line.rstrip().endswith("...") for line in listed), "no summary cut short"
    assert "Start here:" in text and "kernelscope demo" in text


@pytest.mark.parametrize("command", COMMANDS)
def test_each_help_has_examples_of_itself_and_fits_80_columns(command):
    text = help_of(command)
    examples = text[text.index("Examples:") :].split("Options:")[0].splitlines()[1:]
    assert [line for line in examples if line.strip().startswith(f"kernelscope {command}")], "an example of itself"
    too_wide = [line for line in text.splitlines() if len(line) > 80]
    assert not too_wide, too_wide


def test_the_groups_help_fits_80_columns():
    too_wide = [line for line in help_of().splitlines() if len(line) > 80]
    assert not too_wide, too_wide
