"""The recorder's trace.json.gz: the trace's bytes in a gzip file, written without a GzipFile, whose writer is a
reference cycle on Python 3.12 that the cyclic collector closed later, inside a compiled region too (where dynamo
then compiled GzipFile.closed: seen on the H200)."""

from __future__ import annotations

import gc
import gzip
import os

import pytest

torch = pytest.importorskip("torch")
from kernelscope.recorder import ModuleFunctionKernelProfiler, trace_export  # noqa: E402
from torch import nn  # noqa: E402


def test_the_gzip_file_holds_the_trace_in_members_that_say_where_they_end(tmp_path, monkeypatch):
    from kernelscope.analyzer.gzip_members import gzip_members, json_size

    monkeypatch.setattr(trace_export, "GZIP_MEMBER_BYTES", 1000)  # many members
    source, target = tmp_path / "trace.json", tmp_path / "trace.json.gz"
    data = os.urandom(2500) + b'{"traceEvents": []}' * 300
    source.write_bytes(data)
    trace_export.gzip_file(source, target)
    written = target.read_bytes()
    assert written[:2] == b"\x1f\x8b" and gzip.decompress(written) == data
    with open(target, "rb") as raw:
        members = gzip_members(raw.fileno())
    assert [m.size for m in members] == [1000] * 8 + [len(data) - 8000]
    assert json_size(target) == len(data), "what the analyzer sizes its memory limit by"


def test_writing_the_gzip_file_leaves_nothing_for_the_cyclic_collector(tmp_path):
    source = tmp_path / "trace.json"
    source.write_bytes(b"[]" * 1000)
    while gc.collect():  # garbage of earlier tests freed in stages (a finalizer releasing more) is not this write's
        pass
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        trace_export.gzip_file(source, tmp_path / "trace.json.gz")
        gc.collect()
        left = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == []


def test_profile_opens_no_gzip_writer(tmp_path, monkeypatch):
    opened = []
    init = gzip.GzipFile.__init__

    def spy(self, filename=None, mode=None, *args, **kwargs):
        opened.append(mode)
        init(self, filename, mode, *args, **kwargs)

    monkeypatch.setattr(gzip.GzipFile, "__init__", spy)
    ModuleFunctionKernelProfiler().profile(nn.Linear(4, 2), [((torch.randn(3, 4),), {})], out=tmp_path / "run")
    assert not [mode for mode in opened if mode and "w" in mode], "a GzipFile writer: a reference cycle on 3.12"
    assert gzip.decompress((tmp_path / "run" / "trace.json.gz").read_bytes()).lstrip().startswith(b"{")
