"""Sample tensors offline (Run.function_data(tensors=True)) and untrusted sample stores: samples.pt is
read only with torch.load(weights_only=True), a store whose pickle would run code is refused before the
code runs, and the analyzer never unpickles anything."""

import ast
import shutil
import subprocess
import sys

import pytest
from conftest import REPO
from kernelscope.analyzer import BadInputError, KernelscopeError, TensorMeta, load_run

torch = pytest.importorskip("torch")


class CreatesAFile:
    """Unpickling this runs ``open(path, "w")``: the marker file appears if the payload ever runs."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture
def hostile_run(demo_run, tmp_path):
    """A copy of the demo run whose samples.pt would create ``marker`` when unpickled."""
    *_, out = demo_run
    run = tmp_path / "hostile"
    shutil.copytree(out, run)
    marker = tmp_path / "payload-ran"
    store = torch.load(run / "samples.pt", weights_only=True)
    store["functions"]["linear"][0][0][0] = CreatesAFile(marker)
    torch.save(store, run / "samples.pt")
    return run, marker


def test_function_data_with_tensors_gives_the_recorded_inputs(demo_run):
    _profiler, _model, _samples, _frame, live, out = demo_run
    with load_run(out) as run:
        offline = run.function_data(tensors=True)
        metadata = run.function_data()
    assert offline.keys() == live.keys()
    compared = 0
    for name, entries in live.items():
        for (calls, (args, kwargs)), (off_calls, (off_args, off_kwargs)) in zip(entries, offline[name], strict=True):
            assert off_calls == calls and isinstance(off_args, tuple) and off_kwargs.keys() == kwargs.keys()
            for value, stored in zip(args, off_args, strict=True):
                if isinstance(value, torch.Tensor):
                    assert stored.device.type == "cpu" and stored.dtype == value.dtype
                    assert torch.equal(stored, value.cpu())
                    compared += 1
    assert compared > 20
    assert all(isinstance(a, TensorMeta) for _, (args, _) in metadata["linear"] for a in args[:2]), "default unchanged"


def test_a_hostile_sample_store_is_refused_and_its_payload_never_runs(hostile_run):
    run_dir, marker = hostile_run
    with load_run(run_dir) as run:  # the metadata path never touches samples.pt
        assert len(run.profiling_df()) > 0 and "linear" in run.function_data()
        with pytest.raises(
            BadInputError, match=r"samples\.pt: was refused by torch\.load\(weights_only=True\): .*open"
        ):
            run.function_data(tensors=True)
    assert not marker.exists(), "the payload ran"
    # control: the payload is live, so the assertion above could fail
    torch.load(run_dir / "samples.pt", weights_only=False)
    assert marker.exists()


def test_the_cli_never_reads_the_sample_store(hostile_run):
    run_dir, marker = hostile_run
    for command in (["analyze", run_dir, "--kernels"], ["sql", run_dir, "SELECT count(*) FROM samples"]):
        done = subprocess.run(
            [sys.executable, "-m", "kernelscope.cli", *map(str, command), "--format", "csv"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    assert not marker.exists()


def test_corrupt_sample_store_is_bad_input(demo_run, tmp_path):
    *_, out = demo_run
    run_dir = tmp_path / "corrupt"
    shutil.copytree(out, run_dir)
    (run_dir / "samples.pt").write_bytes(b"PK\x03\x04 not really a zip")
    with load_run(run_dir) as run, pytest.raises(BadInputError, match=r"samples\.pt: is not a file that torch\.save"):
        run.function_data(tensors=True)


class _TensorThatLies:
    """Pickled as torch.save pickles a tensor, over a storage of 4 floats, with ``view``'s offset, sizes and strides."""

    def __init__(self, offset, sizes, strides):
        self.view = (offset, sizes, strides)

    def __reduce__(self):
        import collections

        storage = torch.storage.TypedStorage(wrap_storage=torch.zeros(4).untyped_storage(), dtype=torch.float32,
                                             _internal=True)  # fmt: skip
        return (torch._utils._rebuild_tensor_v2, (storage, *self.view, False, collections.OrderedDict()))


@pytest.mark.parametrize(
    "view",
    [(0, (16,), (1,)), (100, (4,), (1,)), (-1, (4,), (1,)), (0, (2**33,), (1,)), (0, (2**62, 4), (1, 1)),
     (0, (4,), (-1,)), (0, (2**40,), (2**40,))],
    ids=["past the storage", "offset past it", "offset -1", "32 GiB", "numel overflows", "stride -1", "2^80 bytes"],
)  # fmt: skip
def test_a_tensor_whose_sizes_or_offset_lie_about_its_storage_is_refused(view, demo_run, tmp_path):
    """A storage of 4 floats (its entry the size it declares) viewed past its end, at a negative offset or by sizes
    whose product overflows: torch.load refuses each (a storage it loads cannot be resized), one line naming the file,
    and allocates nothing of what the view claims."""
    *_, out = demo_run
    run_dir = tmp_path / "lying"
    shutil.copytree(out, run_dir)
    store = torch.load(run_dir / "samples.pt", weights_only=True)
    store["functions"]["linear"][0][0][0] = _TensorThatLies(*view)
    torch.save(store, run_dir / "samples.pt")
    with load_run(run_dir) as run, pytest.raises(BadInputError, match=r"samples\.pt: was refused by torch\.load"):
        run.function_data(tensors=True)


def test_sample_store_of_another_run_is_bad_input(demo_run, tmp_path):
    *_, out = demo_run
    run_dir = tmp_path / "mixed"
    shutil.copytree(out, run_dir)
    store = torch.load(run_dir / "samples.pt", weights_only=True)
    store["functions"]["linear"].pop()
    torch.save(store, run_dir / "samples.pt")
    with load_run(run_dir) as run, pytest.raises(BadInputError, match=r"holds \d+ samples of 'linear', samples\.json"):
        run.function_data(tensors=True)


def test_no_sample_tensors_is_a_clear_error(demo_run, tmp_path):
    with load_run(REPO / "sample_traces" / "mlp") as run:  # saved without tensors: over the limit
        with pytest.raises(BadInputError) as raised:
            run.function_data(tensors=True)
    said = "(samples.pt was not saved: its distinct inputs hold 49.6 MiB, over the limit of 4.0 MiB)"
    assert str(raised.value).endswith(said)
    with load_run(REPO / "sample_traces" / "bert") as run:  # recorded keeping none: said so, not "over the limit of 0"
        with pytest.raises(BadInputError) as raised:
            run.function_data(tensors=True)
    assert "recorded with sample_tensor_limit_mb=0, which keeps none; its distinct inputs hold 163.3 MiB)" in str(
        raised.value
    )
    with load_run(REPO / "sample_traces" / "mlp" / "trace.json.gz") as run:
        with pytest.raises(BadInputError, match="is a trace, not a run directory"):
            run.function_data(tensors=True)
    *_, out = demo_run
    run_dir = tmp_path / "without-pt"
    shutil.copytree(out, run_dir)
    (run_dir / "samples.pt").unlink()
    with load_run(run_dir) as run, pytest.raises(BadInputError, match=r"missing its samples\.pt"):
        run.function_data(tensors=True)
    (run_dir / "samples.pt").mkdir()  # a directory in its place: said, not "missing"
    with load_run(run_dir) as run, pytest.raises(BadInputError) as raised:
        run.function_data(tensors=True)
    assert str(raised.value) == f"{run_dir / 'samples.pt'}: is a directory, not a regular file"


def test_without_torch_the_error_says_what_to_install(demo_run, monkeypatch):
    *_, out = demo_run
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    with load_run(out) as run, pytest.raises(KernelscopeError, match=r"needs torch \(pip install"):
        run.function_data(tensors=True)


def _calls(tree):
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def test_the_analyzer_never_unpickles():
    """No analyzer module imports a deserializer of code, and its one torch.load passes weights_only=True."""
    unsafe = {"pickle", "_pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle", "joblib", "jsonpickle"}
    loads = []
    for path in sorted((REPO / "analyzer").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not {a.name.split(".")[0] for a in node.names} & unsafe, f"{path.name} imports {node.names}"
            if isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] not in unsafe, f"{path.name} imports {node.module}"
        for call in _calls(tree):
            if isinstance(call.func, ast.Attribute) and call.func.attr in {"load", "loads", "Unpickler"}:
                owner = ast.unparse(call.func.value)
                if owner not in {"orjson", "json"}:
                    loads.append((path.name, owner, {k.arg: ast.unparse(k.value) for k in call.keywords}))
    assert loads == [("sample_tensors.py", "torch", {"weights_only": "True", "map_location": "'cpu'"})]


def _rezip(source, target, change=lambda name, info: info.compress_type):
    """A copy of the zip ``source`` whose entries are stored or deflated as ``change(name, info)`` says."""
    import zipfile

    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            copy = zipfile.ZipInfo(info.filename, info.date_time)
            copy.compress_type = change(info.filename, info)
            with old.open(info) as src, new.open(copy, "w", force_zip64=True) as dst:
                shutil.copyfileobj(src, dst, 1 << 24)


@pytest.fixture
def swollen_run(demo_run, tmp_path):
    """A copy of the demo run whose samples.pt holds one 16 MiB tensor of zeros."""
    *_, out = demo_run
    run_dir = tmp_path / "swollen"
    shutil.copytree(out, run_dir)
    store = torch.load(run_dir / "samples.pt", weights_only=True)
    store["functions"]["linear"][0][0][0] = torch.zeros(4 << 20)
    torch.save(store, run_dir / "samples.pt")
    return run_dir


def test_a_deflated_sample_store_is_refused_before_torch_inflates_it(swollen_run, monkeypatch):
    """A zip bomb: the 16 MiB storage deflated to about 16 KB (an 8 GiB one would be 35 MB)."""
    import zipfile

    bomb = swollen_run / "bomb.pt"
    _rezip(swollen_run / "samples.pt", bomb, lambda name, info: zipfile.ZIP_DEFLATED)
    bomb.replace(swollen_run / "samples.pt")
    assert (swollen_run / "samples.pt").stat().st_size < 1 << 20
    inflated = torch.load(swollen_run / "samples.pt", weights_only=True)  # control: torch reads it whole
    assert inflated["functions"]["linear"][0][0][0].nbytes == 16 << 20
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load was called"))
    with load_run(swollen_run) as run, pytest.raises(BadInputError, match=r"samples\.pt: holds a compressed entry"):
        run.function_data(tensors=True)


def test_a_sample_store_declaring_more_than_the_limit_is_refused(swollen_run, monkeypatch):
    from kernelscope.analyzer import sample_tensors

    monkeypatch.setattr(sample_tensors, "read_limit_bytes", lambda: 8 << 20)
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load was called"))
    with load_run(swollen_run) as run:
        with pytest.raises(BadInputError, match=r"declares \d+ bytes, more than the 8388608 that reading sample"):
            run.function_data(tensors=True)


def test_entries_that_declare_more_than_the_file_holds_are_refused(swollen_run, monkeypatch):
    """The zip's directory says 3.75 GiB for the storage's entry, stored, in a file of 16 MiB."""
    import struct

    path = swollen_run / "samples.pt"
    data = bytearray(path.read_bytes())
    entry = data.rfind(b"PK\x01\x02", 0, data.rfind(b"/data/0"))  # the storage's central directory header
    assert struct.unpack_from("<II", data, entry + 20) == (16 << 20, 16 << 20)
    struct.pack_into("<II", data, entry + 20, 15 << 28, 15 << 28)  # its compressed and uncompressed sizes
    path.write_bytes(bytes(data))
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load was called"))
    with load_run(swollen_run) as run, pytest.raises(BadInputError, match="declares more bytes than the file holds"):
        run.function_data(tensors=True)


def test_a_storage_declared_larger_than_its_entry_is_refused(swollen_run, monkeypatch):
    """The pickle names 4 Mi floats; the storage's entry holds 1 KiB of them."""
    import zipfile

    path = swollen_run / "samples.pt"
    with zipfile.ZipFile(path) as old, zipfile.ZipFile(swollen_run / "cut.pt", "w") as new:
        for info in old.infolist():
            data = old.read(info)
            new.writestr(info, data[:1024] if len(data) == 16 << 20 else data)
    (swollen_run / "cut.pt").replace(path)
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load was called"))
    with load_run(swollen_run) as run:
        with pytest.raises(
            BadInputError, match=r"declares storage '\d+' of 16777216 bytes, and holds an entry of 1024"
        ):
            run.function_data(tensors=True)


class _WalkedTooLong(Exception):
    pass


def test_a_sample_of_containers_shared_over_and_over_is_refused_at_once(demo_run, tmp_path, monkeypatch):
    """A pickle writes a container once and refers to it again: 48 levels of a list holding the level below twice
    take a few hundred bytes and are 2^48 values walked as the tree the sample is; the depth check walked them for
    ever (the test stops it after 20 s)."""
    import signal

    *_, out = demo_run
    run_dir = tmp_path / "shared"
    shutil.copytree(out, run_dir)
    store = torch.load(run_dir / "samples.pt", weights_only=True)
    level = []
    for _ in range(48):
        level = [level, level]
    store["functions"]["linear"][0][0][0] = level
    torch.save(store, run_dir / "samples.pt")
    monkeypatch.setattr("kernelscope.analyzer.sample_tensors.MAX_STORE_VALUES", 10_000)  # the demo's: a few dozen

    def stop(signum, frame):
        raise _WalkedTooLong

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(20)
    try:
        with (
            load_run(run_dir) as run,
            pytest.raises(BadInputError, match=r"samples\.pt: holds more than 10,000 values"),
        ):
            run.function_data(tensors=True)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
