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


# Runs the command's own entry point (kernelscope.entry, as the installed script does) on each argument list in one
# process, then prints which heavy modules got imported: --help and usage errors need none of them.
HEAVY = ("pandas", "duckdb", "torch", "kernelscope.analyzer")
LIGHT_RUN = """
import json, sys
from kernelscope import entry
codes = []
arg_lists, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for args in arg_lists:
    sys.argv = ["kernelscope", *args]
    try:
        entry.main()
    except SystemExit as exc:
        codes.append(exc.code)
sys.stdout.write("\\n" + json.dumps([codes, sorted(m for m in heavy if m in sys.modules)]) + "\\n")
"""


def heavy_modules_after(*arg_lists: list[str]) -> tuple[list, list[str]]:
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", LIGHT_RUN, json.dumps(arg_lists), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    codes, loaded = json.loads(done.stdout.splitlines()[-1])
    return codes, loaded


def test_help_of_every_command_imports_no_heavy_module():
    """pandas, DuckDB, the analyzer and torch take ~0.5 s to import: --help needs none (nor does a new command's)."""
    codes, loaded = heavy_modules_after(["--help"], ["-h"], *([command, "--help"] for command in COMMANDS))
    assert codes == [0] * (len(COMMANDS) + 2)
    assert loaded == []


def test_usage_errors_import_no_heavy_module():
    codes, loaded = heavy_modules_after(
        [], ["nosuchcommand"], ["analyze"], ["bench", "RUN", "--repeat", "0"], ["sql", "RUN", "--format", "xml"]
    )
    assert codes == [2] * 5
    assert loaded == []


def test_top_k_says_every_format_but_a_table_gets_every_row():
    """--top-k's help named csv/json/parquet: jsonl, which gets every row too, was left out."""
    from kernelscope.output import FORMATS

    text = " ".join(help_of("analyze").split())
    default = text[text.index("--top-k") :].split("]")[0]
    assert all(fmt in default for fmt in FORMATS if fmt != "table"), default


def test_help_of_the_package_says_what_it_gives_and_the_docs_archive_is_one_of_them():
    """help(kernelscope) said only that names resolve lazily, over a list of the command's own modules; and the
    docs' ``Archive(path).run(ID)`` (the error of load_run() of an archive names it too) was no name of the
    package: ``ks.Archive`` was an AttributeError. Its docstring now names each name it gives, with what it is."""
    import re

    import kernelscope
    from kernelscope.analyzer import Archive

    assert kernelscope.Archive is Archive
    described = set(re.findall(r"``(\w+)``", kernelscope.__doc__))
    assert described == set(kernelscope.__all__) - {"__version__"}, described ^ set(kernelscope.__all__)


def test_help_of_what_the_package_gives_points_to_files_a_user_has():
    """help(ks.describe_results) said "describe_results of SPEC §1", help(Run.profiling_df) "SPEC §1 columns
    first": SPEC.md is no file of the repository or the package. The docs a user has are README.md and docs/."""
    import pydoc

    import kernelscope

    pytest.importorskip("torch")  # ModuleFunctionKernelProfiler and bench are the recorder's
    for name in set(kernelscope.__all__) - {"__version__"}:
        text = pydoc.render_doc(getattr(kernelscope, name), renderer=pydoc.plaintext)
        assert "SPEC" not in text, (name, [line for line in text.splitlines() if "SPEC" in line])
        # open_archive's was "An existing archive.": not what it returns, what that offers, nor what it refuses
        assert len(getattr(kernelscope, name).__doc__.split()) >= 12, (name, getattr(kernelscope, name).__doc__)


def test_help_of_the_package_names_every_question_a_run_answers():
    """help(ks) listed Run's describe, profiling_df, function_data, sql and time_by, not tree() (each module's time,
    its submodules' included: docs/report.md), describe_by_rank() (README.md) or time_by_rank()."""
    import re

    import kernelscope
    from kernelscope.analyzer import Run

    answers = {"describe", "describe_by_rank", "profiling_df", "function_data", "sql", "time_by", "time_by_rank"}
    answers.add("tree")
    assert answers <= {name for name in dir(Run) if callable(getattr(Run, name))}
    named = set(re.findall(r"\.(\w+)\(", kernelscope.__doc__))
    assert answers <= named, answers - named
