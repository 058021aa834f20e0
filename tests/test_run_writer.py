"""Writers racing for one run directory (recorder/run_writer.py): two ``profile(out=X, overwrite=True)`` leave nothing
but X, holding one writer's whole run, in every interleaving of their renames; without overwrite the second is
refused. The interleavings are forced: a writer waits at a rename until the other has reached a given point."""

import errno
import os
import threading

import orjson
import pytest

pytest.importorskip("torch")
from kernelscope.analyzer import RunExistsError  # noqa: E402
from kernelscope.recorder import run_writer  # noqa: E402
from kernelscope.recorder.retention import CappedSampleBook  # noqa: E402

WAIT_S = 30  # a forced wait that never ends is a failure, not a hung test


class Trace:
    """What write_run asks of a torch.profiler.profile: to export its trace."""

    def export_chrome_trace(self, path: str) -> None:
        with open(path, "wb") as file:
            file.write(b'{"traceEvents": []}')


def _write(out, writer: str, overwrite: bool = True) -> None:
    run_writer.write_run(
        out, Trace(), CappedSampleBook(None), {"writer": writer}, tensor_limit_bytes=None, overwrite=overwrite
    )


def _whole_run_of(out) -> str:
    """The writer of the run at ``out``, after checking it holds every file of one run."""
    assert sorted(os.listdir(out)) == ["manifest.json", "samples.json", "samples.pt", "trace.json.gz"]
    return orjson.loads((out / "manifest.json").read_bytes())["writer"]


def _race(monkeypatch, tmp_path, pause_a, pause_b=None):
    """Writers A and B replace the run at tmp_path/run. ``pause_a(src, dst, before)``: whether A, at this rename
    (``before``: about to make it, else just made it), waits for B to finish (or, with ``pause_b``, to reach its own
    pause, where B waits for A to finish). Returns each writer's exception (None where it wrote its run)."""
    out = tmp_path / "run"
    _write(out, "old")
    rename = os.rename
    b_started, b_paused, done = threading.Event(), threading.Event(), {"A": threading.Event(), "B": threading.Event()}
    paused = set()

    def waits(me, src, dst, before):
        rule = pause_a if me == "A" else pause_b
        if rule is None or me in paused or not rule(str(src), str(dst), before):
            return
        paused.add(me)
        if me == "A":
            b_started.set()
            assert (b_paused if pause_b else done["B"]).wait(WAIT_S), "B never reached its turn"
        else:
            b_paused.set()
            assert done["A"].wait(WAIT_S), "A never finished"

    def forced(src, dst):
        me = threading.current_thread().name
        waits(me, src, dst, True)
        rename(src, dst)
        waits(me, src, dst, False)

    monkeypatch.setattr(run_writer.os, "rename", forced)
    errors = {}

    def writer(me):
        if me == "B":
            assert b_started.wait(WAIT_S)
        try:
            _write(out, me)
            errors[me] = None
        except Exception as exc:  # noqa: BLE001 (reported by the test)
            errors[me] = exc
        finally:
            done[me].set()

    threads = [threading.Thread(target=writer, args=(me,), name=me) for me in "AB"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S * 3)
    return out, errors


def _aside(dst: str) -> bool:
    return dst.endswith(".old")


RACES = {
    # B puts its run in place while A has the old run moved aside, before A puts its own there
    "a run put in place while the old one is aside": (lambda src, dst, before: _aside(dst) and not before, None),
    # both find the old run there; B moves it aside first, then A's move of it finds nothing
    "the old run moved aside by both": (
        lambda src, dst, before: _aside(dst) and before,
        lambda src, dst, before: _aside(dst) and not before,
    ),
}


@pytest.mark.parametrize("race", RACES)
def test_racing_overwrites_leave_one_whole_run_and_nothing_else(monkeypatch, tmp_path, race):
    out, errors = _race(monkeypatch, tmp_path, *RACES[race])
    assert errors == {"A": None, "B": None}, "both writers wrote their run"
    assert os.listdir(tmp_path) == ["run"], "no run moved aside, no staging folder left"
    assert _whole_run_of(out) in ("A", "B")


def test_a_run_put_in_place_since_the_check_is_never_replaced_without_overwrite(monkeypatch, tmp_path):
    out = tmp_path / "run"
    check = run_writer.check_destination

    def checked_then_taken(*args, **kwargs):  # B finds out free; A writes its run there before B's is in place
        check(*args, **kwargs)
        monkeypatch.setattr(run_writer, "check_destination", check)
        _write(out, "A", overwrite=False)

    monkeypatch.setattr(run_writer, "check_destination", checked_then_taken)
    with pytest.raises(RunExistsError, match="already exists"):
        _write(out, "B", overwrite=False)
    assert os.listdir(tmp_path) == ["run"] and _whole_run_of(out) == "A"


def test_a_failed_swap_puts_the_old_run_back(monkeypatch, tmp_path):
    out = tmp_path / "run"
    _write(out, "old")
    rename, renames_of_the_run = os.rename, []

    def failing(src, dst):  # the first rename of the new run finds the old one; the second, with it aside, fails
        if str(src).endswith(".partial"):
            renames_of_the_run.append(dst)
            if len(renames_of_the_run) == 2:
                raise OSError(errno.EIO, "Input/output error", str(src))
        rename(src, dst)

    monkeypatch.setattr(run_writer.os, "rename", failing)
    with pytest.raises(OSError, match="Input/output error"):
        _write(out, "new")
    assert os.listdir(tmp_path) == ["run"] and _whole_run_of(out) == "old"


@pytest.mark.parametrize(
    "name", ["new\nline", "back\\slash", "both\\\n"], ids=["newline", "backslash", "both"]
)
def test_a_run_is_written_under_a_folder_whose_name_kinetos_export_mangles(tmp_path, name):
    """Kineto's export drops a newline from the path it renames its .tmp to and reads a backslash as '/': a real
    profiler's trace, written under such a folder, whole and nothing else left."""
    import torch

    with torch.profiler.profile() as prof:
        torch.ones(3).add_(1)
    out = tmp_path / name / "run"
    run_writer.write_run(out, prof, CappedSampleBook(None), {}, tensor_limit_bytes=None, overwrite=False)
    assert sorted(os.listdir(out)) == ["manifest.json", "samples.json", "samples.pt", "trace.json.gz"]
    assert os.listdir(tmp_path / name) == ["run"]
