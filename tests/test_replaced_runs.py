"""A run directory that `kernelscope record --force` replaces (its run renamed aside, the new one renamed in, the old
removed) while another process reads it: the reader reads one run whole, the old or the new, never the manifest
of one and the trace of the other; an archive adds the run its id was computed from."""

import os
import shutil

import pandas as pd
import pytest
from conftest import REPO
from kernelscope.analyzer import Archive, load_run
from kernelscope.analyzer import archive as archive_module
from kernelscope.analyzer import run as run_module
from kernelscope.analyzer.archive import run_id_of

OLD = REPO / "sample_traces" / "mlp"
NEW = REPO / "sample_traces" / "transformer_encoder"


def _replaced_once(out, real):
    """``real`` called after the run at ``out`` is replaced by NEW, as record --force replaces it, on the first call."""
    calls = []

    def replacing(*args, **kwargs):
        if not calls:
            calls.append(1)
            staging, aside = out.with_name(".out.staging"), out.with_name(".out.old")
            shutil.copytree(NEW, staging)
            os.rename(out, aside)
            os.rename(staging, out)
            shutil.rmtree(aside)
        return real(*args, **kwargs)

    return replacing


def test_a_run_replaced_while_it_loads_is_read_again_whole(tmp_path, monkeypatch):
    out = tmp_path / "out"
    shutil.copytree(OLD, out)
    monkeypatch.setattr(run_module, "ingest_ranks", _replaced_once(out, run_module.ingest_ranks))
    with load_run(out) as run:
        got = run.describe(top_k=None)
    monkeypatch.undo()
    with load_run(NEW) as run:
        assert got.equals(run.describe(top_k=None))


def test_an_archive_adds_the_run_its_id_was_computed_from(tmp_path, monkeypatch):
    out = tmp_path / "out"
    shutil.copytree(OLD, out)
    monkeypatch.setattr(archive_module, "Run", _replaced_once(out, archive_module.Run))
    run_id, added = Archive(tmp_path / "archive", create=True).add(out)
    monkeypatch.undo()
    assert (run_id, added) == (run_id_of(NEW), True)
    with Archive(tmp_path / "archive").run(run_id) as archived, load_run(NEW) as new:
        pd.testing.assert_frame_equal(archived.describe(top_k=None), new.describe(top_k=None))  # sums in another order


def test_a_run_replaced_at_every_read_is_one_clear_error(tmp_path, monkeypatch):
    """A writer that replaces the run faster than it is read (a loop of record --force): one line, not a loop for ever
    nor the error of files of two runs."""
    from kernelscope.analyzer import KernelscopeError, whole_reads

    stamps = iter(range(1000))
    monkeypatch.setattr(whole_reads, "identity", lambda path: next(stamps))
    closed = []
    with pytest.raises(KernelscopeError, match=r"out: was replaced 5 times while it was read"):
        whole_reads.read_whole(tmp_path / "out", object, closed.append)
    assert len(closed) == 5
