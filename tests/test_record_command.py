"""``kernelscope record`` of the user's own code: what a failing import, factory or model prints (their traceback
and one line, exit 2), the recorder's warnings as lines, and the command to run next."""

import shutil
import sys

import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.cli import main

pytest.importorskip("torch")

MODELS = '''
import warnings

import torch
from torch import nn
import torch.nn.functional as F


class Drift(nn.Module):
    """Each pass slices its input otherwise: the recorder warns that the passes' calls differed."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n += 1
        warnings.warn("the model's own warning", RuntimeWarning)
        return F.relu(x[: self.n])


def drift():
    return Drift(), [((torch.randn(8, 4),), {})]


def small():
    return nn.Linear(4, 2), [((torch.randn(3, 4),), {})]


def broken():
    raise RuntimeError("cannot load weights from /nope.pt")


def exits():
    raise SystemExit(0)  # as sys.exit(0), or a module-level argparse of a script made importable


class Quits(nn.Module):
    def forward(self, x):
        raise SystemExit("done")


def quits():
    return Quits(), [((torch.randn(2),), {})]


def needs_an_argument(n):
    return small()


def closure_taking_x():
    model = nn.Linear(4, 2)
    return (lambda x: model(x)), model  # (fn, module): profile() calls fn() with no argument


def module_then_fn():
    model = nn.Linear(4, 2)
    return model, (lambda: model(torch.randn(3, 4)))  # (fn, module) swapped


def samples_then_module():
    model = nn.Linear(4, 2)
    return [((torch.randn(3, 4),), {})], model  # (module, samples) swapped: the list was called as fn()


def one_tensor():
    return nn.Linear(4, 2), torch.randn(3, 4)  # the input, not a list of (args, kwargs)


def in_training_mode():
    return nn.Sequential(nn.Linear(4, 2), nn.Dropout()), [((torch.randn(3, 4),), {})]


def generated():
    return nn.Linear(4, 2), (((torch.randn(3, 4),), {}) for _ in range(2))


def no_samples():
    return nn.Linear(4, 2), (((torch.randn(3, 4),), {}) for _ in range(0))  # a data loader already exhausted


def no_operator():
    return nn.Identity(), [((torch.randn(3, 4),), {})]
'''


def record(tmp_path, monkeypatch, *args):
    (tmp_path / "user_models.py").write_text(MODELS)
    (tmp_path / "bad_import.py").write_text("import no_such_package_here\n\ndef model():\n    pass\n")
    monkeypatch.chdir(tmp_path)
    # the command puts the folder on sys.path for the rest of its process: in this one, the test's tmp folder (one
    # holds a types.py) stayed on it for every later test, and inductor's subprocesses, which get sys.path as their
    # PYTHONPATH, imported that types.py: its vector ISA probe failed, so a later inductor compile had no vector ISA
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("user_models", "bad_import"):  # each test imports its own folder's
        monkeypatch.delitem(sys.modules, name, raising=False)
    return CliRunner().invoke(main, ["record", *map(str, args), "--warmup", "1"])


def test_a_factory_that_raises_shows_its_own_frames_and_one_line(tmp_path, monkeypatch):
    result = record(tmp_path, monkeypatch, "user_models:broken", "--out", tmp_path / "run")
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):" and "user_models.py" in lines[1], "from the user's frame"
    assert "click" not in result.stderr and "cli.py" not in result.stderr, "no frame of the command before theirs"
    assert lines[-1] == (
        "kernelscope: error: user_models:broken: the factory raised RuntimeError: cannot load weights from /nope.pt "
        "(traceback above)"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("target", "what"),
    [
        ("user_models:exits", "the factory raised SystemExit: 0"),
        ("user_models:quits", "the model raised SystemExit: done"),
    ],
)
def test_user_code_that_exits_is_one_line_and_exit_2_not_a_silent_exit(tmp_path, monkeypatch, target, what):
    """A SystemExit of their code ended record with its code (0: success, nothing recorded, nothing said)."""
    result = record(tmp_path, monkeypatch, target, "--out", tmp_path / "run")
    assert (
        result.exit_code == 2
        and result.stderr.splitlines()[-1] == f"kernelscope: error: {target}: {what} (traceback above)"
    )
    assert not (tmp_path / "run").exists()


def test_a_module_that_fails_to_import_shows_its_own_frames_and_one_line(tmp_path, monkeypatch):
    result = record(tmp_path, monkeypatch, "bad_import:model")
    assert result.exit_code == 2 and "bad_import.py" in result.stderr.splitlines()[1]
    assert result.stderr.splitlines()[-1] == (
        "kernelscope: error: bad_import:model: importing its module raised ModuleNotFoundError: No module named "
        "'no_such_package_here' (traceback above)"
    )


@pytest.mark.parametrize("target", ["typo.py:make", "typo:make"])
def test_a_module_with_a_syntax_error_shows_where_and_one_line(tmp_path, monkeypatch, target):
    """A SyntaxError in the user's file has no frame of theirs (the parser raises it inside importlib): it propagated
    as forty lines of kernelscope's and click's frames, exit 1. It is now the file's line and caret, and one line."""
    (tmp_path / "typo.py").write_text("import torch\n\ndef make(:\n    pass\n")
    monkeypatch.delitem(sys.modules, "typo", raising=False)
    result = record(tmp_path, monkeypatch, target)
    assert result.exit_code == 2, result.output
    assert "importlib" not in result.stderr and "click" not in result.stderr, result.stderr
    assert 'typo.py", line 3' in result.stderr and "def make(:" in result.stderr, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"kernelscope: error: {target}: importing its module raised SyntaxError: invalid syntax (typo.py, line 3) "
        "(traceback above)"
    )


@pytest.mark.parametrize(
    "target, message",
    [
        ("user_models:needs_an_argument", "the factory raised TypeError: needs_an_argument() missing 1 required"),
        ("user_models:closure_taking_x", "the model raised TypeError: closure_taking_x.<locals>.<lambda>() missing"),
        ("user_models:module_then_fn", "returned (module, function): a function comes first, as (fn, module)"),
        ("user_models:samples_then_module", "returned (list, module): the module comes first, as (module, samples)"),
        ("user_models:one_tensor", "the samples are a Tensor; samples are a list of (args, kwargs) pairs, one per"),
        ("user_models:no_samples", "returned no samples (an empty list): the model would not run once; return at"),
    ],
)
def test_a_call_or_a_return_the_command_cannot_use_is_one_line(tmp_path, monkeypatch, target, message):
    result = record(tmp_path, monkeypatch, target, "--out", tmp_path / "run")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"kernelscope: error: {target}: {message}") and result.stderr.count("\n") == 1
    assert not (tmp_path / "run").exists()


def test_a_factorys_generator_of_samples_is_recorded_as_its_list(tmp_path, monkeypatch):
    result = record(tmp_path, monkeypatch, "user_models:generated", "--out", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert "linear" in result.stdout


def test_the_recorders_warnings_are_lines_and_the_models_own_stay_pythons(tmp_path, monkeypatch):
    with pytest.warns(RuntimeWarning, match="the model's own warning") as shown:
        result = record(tmp_path, monkeypatch, "user_models:drift", "--out", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert "kernelscope: warning: the model's calls differed between the warm-up passes" in result.stderr
    assert [str(w.message) for w in shown] == ["the model's own warning"], "shown by Python, once per place"


def test_a_model_in_training_mode_is_recorded_with_a_warning_line(tmp_path, monkeypatch):
    result = record(tmp_path, monkeypatch, "user_models:in_training_mode", "--out", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert "kernelscope: warning: the model is in training mode: its modules Dropout run as in training" in (
        result.stderr
    )


def test_record_says_where_the_run_is_and_what_to_run_next(tmp_path, monkeypatch):
    result = record(tmp_path, monkeypatch, "user_models:small", "--out", tmp_path / "my runs" / "small")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-2] == f"run directory: {tmp_path / 'my runs' / 'small'}"
    assert lines[-1] == f"next: kernelscope analyze '{tmp_path / 'my runs' / 'small'}' --kernels", "quoted for a shell"


def test_a_model_that_ran_no_operator_says_so_and_points_to_no_command_that_refuses_the_run(tmp_path, monkeypatch):
    """An empty table, "0 CPU operator rows", then `next: kernelscope analyze RUN`, which refused the run (no device
    events and no CPU operators): the command pointed to its own dead end."""
    result = record(tmp_path, monkeypatch, "user_models:no_operator", "--out", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"run directory: {tmp_path / 'run'}\n", "no empty table, no next command"
    assert result.stderr == (
        "kernelscope: warning: user_models:no_operator: the model ran no operator while recorded, so the run holds "
        "nothing to analyze\n"
    )


def test_a_file_that_a_module_of_pythons_own_shadows_is_named_in_the_error(tmp_path, monkeypatch):
    """./types.py:make read as Python's own `types` (imported before the command ran): "types has no attribute
    'make'" alone sent the user to a file that has it."""
    (tmp_path / "types.py").write_text("def make():\n    pass\n")
    result = record(tmp_path, monkeypatch, "types:make", "--out", tmp_path / "run")
    assert result.exit_code == 2 and "which shadows ./types.py: name the file instead, types.py:make)" in result.stderr
    missing = record(tmp_path, monkeypatch, "user_models:absent", "--out", tmp_path / "run")
    assert missing.stderr == "kernelscope: error: user_models:absent: user_models has no attribute 'absent'\n"


def test_a_tag_given_twice_is_a_usage_error(tmp_path, monkeypatch):
    """`--tag a=1 --tag a=2` kept a=2 and said nothing; --against refuses a name given twice."""
    result = record(
        tmp_path, monkeypatch, "user_models:generated", "--out", tmp_path / "run", "--tag", "a=1", "--tag", "a=2"
    )
    assert result.exit_code == 2 and "Invalid value for --tag: 'a' is tagged twice ('1' and '2')" in result.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "target, message",
    [
        ("../models/user_models:small", "'../models/user_models' is a path: name its file, ../models/user_models.py:"),
        ("models/user_models:small", "'models/user_models' is a path: name its file, models/user_models.py:small"),
        (".user_models:small", "'.user_models' is not a module name (pkg.module) nor a .py file"),
        ("../absent:small", "'../absent' is not a module name (pkg.module) nor a .py file"),
    ],
)
def test_a_path_given_as_a_module_is_one_line(tmp_path, monkeypatch, target, message):
    """`../models/user_models:small` went to importlib as a relative import: a TypeError's traceback, exit 1."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "user_models.py").write_text(MODELS)
    (tmp_path / "here").mkdir()
    folder = tmp_path / ("here" if target.startswith("..") else "")
    result = record(folder, monkeypatch, target, "--out", tmp_path / "run")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"kernelscope: error: {target}: {message}") and result.stderr.count("\n") == 1


def test_a_run_another_record_put_at_out_meanwhile_is_refused_in_the_command_s_words(tmp_path, monkeypatch):
    """Two `record --out SAME` at once: the one that renames its run second finds the other's there, and said so in
    the Python API's words ('overwrite=True') where the command's option is --force."""
    from kernelscope.recorder import run_writer

    out = tmp_path / "run"
    real = run_writer._move_into_place

    def other_writer_first(staging, target, overwrite):
        shutil.copytree(REPO / "sample_traces" / "mlp", target)
        return real(staging, target, overwrite)

    monkeypatch.setattr(run_writer, "_move_into_place", other_writer_first)
    result = record(tmp_path, monkeypatch, "user_models:small", "--out", out)
    said = f"kernelscope: error: {out}: already exists; choose another --out, or replace it with --force"
    assert (result.exit_code, result.output.strip().splitlines()[-1:]) == (2, [said])
