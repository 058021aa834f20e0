"""Faults in the recorder: the model raising, Ctrl-C, failures while writing the run (full disk,
unwritable directory), and profile() entered twice. After each: the original exception, every patch
undone exactly (object identity of every torch.nn.functional attribute and of each module's __dict__),
no run directory and no staging left, the previous run intact, the samples released."""

import errno
import gc
import os
import re
import threading
import types
import weakref

import pytest
from conftest import assert_patches_undone, snapshot_patch_targets

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.analyzer import KernelscopeError, RecordingBusyError, RunExistsError  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler, run_writer  # noqa: E402
from torch import nn  # noqa: E402


class Probe(nn.Module):
    """Linear + ReLU on an intermediate it can hand out weak references to; may raise on a given call."""

    def __init__(self, error=None, on_call=None):
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.error, self.on_call, self.calls, self.intermediates = error, on_call, [0], []

    def forward(self, x):
        self.calls[0] += 1
        y = x * 2
        self.intermediates.append(weakref.ref(y))
        if self.calls[0] == self.on_call:
            raise self.error
        return F.relu(self.linear(y))


SAMPLES = [((torch.randn(2, 8),), {}), ((torch.randn(3, 8),), {})]


def leftovers(directory):
    return sorted(p.name for p in directory.iterdir())


class Boom(Exception):
    """An exception type of the model's own."""


# (warm-up iterations, samples, the call that raises): which pass of profile() the model fails in
FAILING_CALLS = {
    "in-plain-warmup": (2, 1, 1),  # warm-up 1 is plain, 2 patched, then the recording
    "in-patched-warmup": (1, 2, 1),  # the only warm-up is the patched one: calls 1-2
    "in-recording": (2, 1, 3),  # the recording's first call
    "in-recording-later-sample": (1, 2, 4),  # the recording's second sample
}


@pytest.mark.parametrize(
    "error",
    [ValueError("model failed"), Boom("forward failed"), KeyboardInterrupt()],
    ids=["exception", "own-exception", "ctrl-c"],
)
@pytest.mark.parametrize("where", FAILING_CALLS)
def test_a_failing_model_leaves_nothing_behind(error, where, tmp_path):
    warmup_iterations, samples, on_call = FAILING_CALLS[where]
    model = Probe(error, on_call)
    before = snapshot_patch_targets(model)
    profiler = ModuleFunctionKernelProfiler()
    with pytest.raises(type(error)) as raised:
        profiler.profile(model, SAMPLES[:samples], warmup_iterations=warmup_iterations, out=tmp_path / "run")
    assert raised.value is error
    assert_patches_undone(model, before)
    assert leftovers(tmp_path) == [], "no run directory, not even a partial one"
    error.__traceback__ = None  # its frames hold the failing call's own intermediate
    del raised
    gc.collect()
    assert len(model.intermediates) == on_call
    assert all(ref() is None for ref in model.intermediates), "the failed pass's samples are released"
    assert profiler.run is None and profiler.run_dir is None


def _fail_at(stage, error, monkeypatch):
    """Make one step of writing the run raise ``error``, as a full disk or Ctrl-C would there."""
    if stage == "export":

        def export(self, path):
            with open(path, "w") as out:
                out.write('{"traceEvents": [')  # half a file, then the disk is full
            raise error

        monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", export)
    elif stage == "compress":

        class Compressor:  # the gzip file is open when the disk fills
            def compress(self, data):
                raise error

        from kernelscope.analyzer import gzip_members

        failing = types.SimpleNamespace(DEFLATED=8, compressobj=lambda *args: Compressor())
        monkeypatch.setattr(gzip_members, "_zlib", failing)
    elif stage == "sample tensors":
        monkeypatch.setattr(run_writer.torch, "save", lambda *a, **k: (_ for _ in ()).throw(error))
    elif stage == "manifest":
        write_bytes = run_writer.Path.write_bytes

        def failing(self, data):
            if self.name == "manifest.json":
                raise error
            return write_bytes(self, data)

        monkeypatch.setattr(run_writer.Path, "write_bytes", failing)
    elif stage == "rename":
        rename = run_writer.os.rename

        def failing(src, dst):
            if str(src).endswith(".partial"):
                raise error
            return rename(src, dst)

        monkeypatch.setattr(run_writer.os, "rename", failing)


STAGES = ["export", "compress", "sample tensors", "manifest", "rename"]


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
@pytest.mark.parametrize("stage", STAGES)
def test_a_failure_while_writing_keeps_the_old_run_and_leaves_no_partial_one(stage, error, tmp_path, monkeypatch):
    model = Probe()
    out = tmp_path / "run"
    ModuleFunctionKernelProfiler().profile(model, SAMPLES, warmup_iterations=0, out=out)
    old = {p.name: p.read_bytes() for p in out.iterdir()}
    before = snapshot_patch_targets(model)
    _fail_at(stage, error, monkeypatch)
    profiler = ModuleFunctionKernelProfiler()
    with pytest.raises(type(error)) as raised:
        profiler.profile(model, SAMPLES, warmup_iterations=0, out=out, overwrite=True)
    assert raised.value is error, "the original exception propagates"
    assert_patches_undone(model, before)
    assert leftovers(tmp_path) == ["run"], "no staging, probe or moved-aside directory is left"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old, "the previous run is untouched"
    assert profiler.run is None and not profiler.book.samples


# a temporary run saves no sample tensors, and is written in its own folder, with no rename (run_writer.write_run)
@pytest.mark.parametrize("stage", [stage for stage in STAGES if stage not in ("sample tensors", "rename")])
def test_a_failure_while_writing_a_temporary_run_removes_it(stage, monkeypatch):
    error = OSError(errno.ENOSPC, "No space left on device")
    _fail_at(stage, error, monkeypatch)
    profiler = ModuleFunctionKernelProfiler()
    created = []
    mkdtemp = run_writer.tempfile.mkdtemp

    def made(**kwargs):  # the recorder's directories only: not the spill folder of a DuckDB instance made meanwhile
        path = mkdtemp(**kwargs)
        if not kwargs.get("prefix", "").startswith("kernelscope-spill-"):
            created.append(path)
        return path

    monkeypatch.setattr(run_writer.tempfile, "mkdtemp", made)
    with pytest.raises(OSError) as raised:
        profiler.profile(Probe(), SAMPLES, warmup_iterations=0)
    assert raised.value is error
    assert created and not any(run_writer.Path(path).exists() for path in created)
    assert profiler._scratch is None, "the temporary directory is gone, not waiting for garbage collection"


@pytest.mark.parametrize("stage", ["manifest", "rename"])
def test_a_failure_while_writing_names_the_run_directory_not_its_staging_folder(stage, tmp_path, monkeypatch):
    """An OSError that names the staging folder or a file in it (a full disk as the manifest is written, a
    failing rename) names the run directory the user gave: the staging folder is gone when the message is read."""
    out = tmp_path / "run"
    if stage == "manifest":
        write_bytes = run_writer.Path.write_bytes

        def failing(self, data):
            if self.name == "manifest.json":
                raise OSError(errno.ENOSPC, "No space left on device", str(self))
            return write_bytes(self, data)

        monkeypatch.setattr(run_writer.Path, "write_bytes", failing)
    else:

        def failing(src, dst):
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src), str(dst))

        monkeypatch.setattr(run_writer.os, "rename", failing)
    with pytest.raises(OSError) as raised:
        ModuleFunctionKernelProfiler().profile(Probe(), SAMPLES, warmup_iterations=0, out=out)
    assert (raised.value.filename, raised.value.filename2) == (str(out), None)
    assert leftovers(tmp_path) == []


FILE_SIZE_LIMITED_DEMO = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as one on a full disk fails
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from kernelscope.cli import main
main(["demo", "--out", "run"])
"""


# the demo's trace is ~160 KB of JSON and its samples.pt ~480 KB: the first limit stops samples.pt, the second the
# profiler's export of the trace
@pytest.mark.skipif(os.uname().sysname != "Linux", reason="needs RLIMIT_FSIZE and SIGXFSZ")
@pytest.mark.parametrize(("limit", "problem"), [(300_000, "File too large"), (20_000, "torch.profiler's export")])
def test_a_full_disk_while_writing_a_run_is_one_line_naming_the_run(tmp_path, limit, problem):
    """torch.save turned a failed write into a RuntimeError about zip offsets, and Kineto's export fails without a
    word (the run writer then said "No such file or directory"): each is one line naming the run directory."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", FILE_SIZE_LIMITED_DEMO, str(limit)], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    *kineto, last = done.stderr.strip().splitlines()
    assert last.startswith(f"kernelscope: error: run: {problem}"), last
    assert all("Failed to write" in line for line in kineto), "Kineto's own line about its export, if any"
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing left"


def test_an_unwritable_directory_is_refused_before_the_model_runs(tmp_path, monkeypatch):
    def refuse(**kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(run_writer.tempfile, "mkdtemp", refuse)  # what a read-only mount does, even to root
    model = Probe()
    with pytest.raises(KernelscopeError, match=r"is not writable \(Permission denied\)$"):
        ModuleFunctionKernelProfiler().profile(model, SAMPLES, out=tmp_path / "run")
    assert model.calls == [0] and leftovers(tmp_path) == []


def test_a_run_path_that_is_not_utf8_is_refused_before_the_model_runs(tmp_path):
    out = tmp_path / os.fsdecode(b"run-\xff")  # a name of bytes that are not UTF-8, as os.listdir gives it
    model = Probe()
    with pytest.raises(KernelscopeError, match=r"is a path that is not UTF-8 text, where torch.profiler cannot write"):
        ModuleFunctionKernelProfiler().profile(model, SAMPLES, out=out)
    assert model.calls == [0] and leftovers(tmp_path) == []


def test_a_command_line_word_that_is_not_utf8_is_kept_as_its_escapes(tmp_path, monkeypatch):
    monkeypatch.setattr(run_writer.sys, "argv", ["train.py", os.fsdecode(b"--data=caf\xe9"), "\ud800"])
    ModuleFunctionKernelProfiler().profile(Probe(), SAMPLES, out=tmp_path / "run")
    manifest = __import__("json").loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["command_line"] == ["train.py", "--data=caf\\xe9", "\\ud800"]


def test_a_second_thread_gets_a_clear_error_and_nothing_is_patched_twice():
    inside, release = threading.Event(), threading.Event()
    original_relu = F.relu

    class Blocking(nn.Module):
        def forward(self, x):
            if F.relu is not original_relu:  # the recorded pass: patched; hold it there
                inside.set()
                release.wait(30)
            return F.relu(x)

    model = Blocking()
    before = snapshot_patch_targets(model)
    first = threading.Thread(target=ModuleFunctionKernelProfiler().profile, args=(model, [((torch.randn(2),), {})]))
    first.start()
    try:
        assert inside.wait(30)
        patched = F.relu
        other = nn.Linear(2, 2)
        with pytest.raises(RecordingBusyError, match="another kernelscope recording is running in this process"):
            ModuleFunctionKernelProfiler().profile(other, [((torch.randn(2),), {})])
        assert F.relu is patched and F.relu.__wrapped__ is original_relu, "wrapped once, not twice"
        assert "forward" not in vars(other), "the second call patched nothing"
    finally:
        release.set()
        first.join(30)
    assert_patches_undone(model, before)


@pytest.mark.parametrize("inner_model", [nn.Identity, lambda: nn.Linear(2, 2)], ids=["identity", "linear"])
def test_reentering_profile_from_the_model_is_refused_and_patches_nothing_twice(inner_model):
    seen = []

    class Reenter(nn.Module):
        def forward(self, x):
            inner = inner_model()
            try:
                ModuleFunctionKernelProfiler().profile(inner, [((x,), {})], warmup_iterations=0)
            except RecordingBusyError as exc:
                seen.append((isinstance(exc, RuntimeError), getattr(F.linear, "__wrapped__", F.linear), str(exc)))
            assert "forward" not in vars(inner)
            return x

    model = Reenter()
    before = snapshot_patch_targets(model)
    ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2),), {})], warmup_iterations=1)
    original_linear = before[0]["linear"]
    assert [(is_runtime, linear) for is_runtime, linear, _ in seen] == [(True, original_linear)] * 2, (
        "refused in warmup and recording alike"
    )
    assert all("not re-entrant" in message for *_, message in seen)
    assert_patches_undone(model, before)


def test_a_run_directory_is_made_with_the_umask(tmp_path):
    """0777/0666 less the umask, as mkdir and open make them, not mkdtemp's 0700: colleagues can read a shared run."""
    import os

    old = os.umask(0o027)
    try:
        ModuleFunctionKernelProfiler().profile(Probe(), SAMPLES, warmup_iterations=0, out=tmp_path / "run")
    finally:
        os.umask(old)
    assert (tmp_path / "run").stat().st_mode & 0o777 == 0o750
    assert {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "run").iterdir()} == {
        name: 0o640 for name in ("manifest.json", "trace.json.gz", "samples.json", "samples.pt")
    }


def _file(path):
    path.write_text("the user's notes")


def _folder(path):
    path.mkdir()
    (path / "notes.txt").write_text("the user's notes")


def _folder_with_a_manifest_folder(path):
    (path / "manifest.json").mkdir(parents=True)


def _link(path):
    _folder(path.parent / "elsewhere")
    path.symlink_to(path.parent / "elsewhere")


def _dangling_link(path):
    path.symlink_to(path.parent / "nowhere")


# what overwrite=True finds at out, that is no run directory: each is refused before the model runs, and left as it was
NOT_RUNS = {
    "a file": (_file, "is not a directory"),
    "a folder of other files": (_folder, "is a directory that is not a kernelscope run (no manifest.json)"),
    "a folder holding a folder manifest.json": (
        _folder_with_a_manifest_folder,
        "is a directory that is not a kernelscope run (its manifest.json is not a regular file)",
    ),
    "a link to a folder": (_link, "is a symbolic link"),
    "a link to nowhere": (_dangling_link, "is a symbolic link"),
    "a FIFO": (os.mkfifo, "is not a directory"),
}


def test_an_empty_folder_at_out_is_refused_without_overwrite_and_replaced_with_it(tmp_path):
    """An empty folder at out (made by hand before the recording) holds nothing to lose: overwrite=True, which the
    refusal tells the user to give, replaces it (it was refused as no run, so the refusal's advice failed)."""
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(RunExistsError, match="replace it with overwrite=True"):
        ModuleFunctionKernelProfiler().profile(Probe(), SAMPLES, warmup_iterations=0, out=out)
    ModuleFunctionKernelProfiler().profile(Probe(), SAMPLES, warmup_iterations=0, out=out, overwrite=True)
    assert (out / "manifest.json").is_file() and os.listdir(tmp_path) == ["out"]


@pytest.mark.parametrize("overwrite", [True, False])
@pytest.mark.parametrize("case", NOT_RUNS)
def test_overwrite_replaces_only_a_run_directory(case, overwrite, tmp_path):
    """overwrite=True (--force) replaces a run; anything else at out (the user's file, a folder such as '.', a link,
    one that leads nowhere, /dev/null) is refused before the model runs, nothing moved aside or removed; without
    overwrite too, for what it is: a link to nowhere passed the check (Path.exists says no) and the rename failed
    once the model had run, 'Not a directory', and the others were told to give overwrite=True, which refuses them."""
    make, problem = NOT_RUNS[case]
    out = tmp_path / "out"
    make(out)
    before = {p.relative_to(tmp_path): p.lstat().st_mode for p in tmp_path.rglob("*")}
    model = Probe()
    with pytest.raises(
        KernelscopeError, match=re.escape(f"out: {problem}; overwrite=True (CLI: --force) replaces only")
    ):
        ModuleFunctionKernelProfiler().profile(model, SAMPLES, warmup_iterations=0, out=out, overwrite=overwrite)
    assert model.calls == [0], "refused before the model runs"
    assert {p.relative_to(tmp_path): p.lstat().st_mode for p in tmp_path.rglob("*")} == before
