"""A load that runs out of memory (MemoryError, or ENOMEM from the system: the machine's memory, or a limit on the
process such as ulimit -v, spent) is one line naming the trace and saying so, never a fault of the file it is not,
and no command prints a traceback for it."""

import errno

import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.analyzer import BadInputError, held, ingest, load_run
from kernelscope.analyzer.trace_parts import unreadable
from kernelscope.cli import main

MLP = REPO / "sample_traces" / "mlp"
TRACE = MLP / "trace.json.gz"
SAID = "ran out of memory while it was loaded"


def _no_memory(*args, **kwargs):
    raise MemoryError


class _SweepWithoutMemory:
    hold = staticmethod(_no_memory)


@pytest.mark.parametrize("whole_parse_limit", [None, 0], ids=["small", "too large to parse whole"])
def test_a_part_that_runs_out_of_memory_is_said_of_the_trace(whole_parse_limit, monkeypatch):
    """A part's load raised MemoryError: it came out of load_run as itself (a traceback in the CLI) or, where the
    trace was too large to parse whole, as 'traceEvents is not a valid array of trace events (MemoryError)'."""
    monkeypatch.setattr(ingest, "_load_part", _no_memory)
    if whole_parse_limit is not None:
        monkeypatch.setattr(ingest, "WHOLE_PARSE_LIMIT", whole_parse_limit)
    with pytest.raises(BadInputError) as raised:
        load_run(TRACE)
    assert str(raised.value).startswith(f"{TRACE}: {SAID}"), raised.value


@pytest.mark.skipif(held.native_sweep is None, reason="the native sweep is not built")
def test_a_sweep_that_runs_out_of_memory_is_said_of_the_run(monkeypatch):
    monkeypatch.setattr(held, "native_sweep", _SweepWithoutMemory)
    with pytest.raises(BadInputError) as raised:
        load_run(MLP)
    assert str(raised.value).startswith(f"{MLP}: {SAID}"), raised.value


def test_a_read_that_fails_for_memory_is_said_as_memory_not_as_the_file():
    """The reader's map of a part failing with ENOMEM (under ulimit -v) read 'could not be read while it was
    loaded (Cannot allocate memory)', as if the file had failed."""
    problem = unreadable(TRACE, OSError(errno.ENOMEM, "Cannot allocate memory")).problem
    assert problem.startswith(SAID), problem
    assert unreadable(TRACE, OSError(errno.EIO, "Input/output error")).problem.endswith("(Input/output error)")


def test_the_cli_says_one_line_where_memory_runs_out_outside_a_load(monkeypatch):
    """A MemoryError past the load (here in the table's output) was a traceback and exit 1."""
    from kernelscope import cli

    monkeypatch.setattr(cli, "emit", _no_memory)
    result = CliRunner().invoke(main, ["analyze", str(MLP)])
    assert result.exit_code == 2, (result.output, result.exception)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("kernelscope: error: ") and "ran out of memory" in line, line
