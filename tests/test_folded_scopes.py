"""A torch.nn module whose forward is one functional call shares that call's scope (ks.fn:linear#0@fc), and
nn.Sequential gets no scope: fewer scopes, the same rows. Checked on the CPU against recordings with every
module scoped, and against the installed torch's own module code."""

import contextlib
from unittest import mock

import pytest

torch = pytest.importorskip("torch")
from kernelscope.analyzer import diff, load_run  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler, instrument, module_scopes  # noqa: E402
from torch import nn  # noqa: E402

ROW_COLUMNS = ["module_name", "function_name", "op", "call_op", "kernel", "kind", "sample_id"]


class Mixed(nn.Module):
    """Folded leaves, leaves that must keep their scope, and a Sequential, in one model."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.conv = nn.Conv2d(1, 4, 3, padding=1)  # folds
        self.reflect = nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect")  # F.pad, then F.conv2d: keeps it
        self.norm = nn.BatchNorm2d(4)
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.head = nn.Sequential(nn.Linear(24, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4), nn.Softmax(-1))
        self.gate = nn.Sigmoid()  # torch.sigmoid, not a functional: keeps its scope

    def forward(self, tokens, image):
        x = self.pool(self.norm(self.reflect(self.conv(image)))).flatten(1)
        x = torch.cat([x, self.embed(tokens).mean(1)], dim=1)
        return self.gate(self.head(x))


def _inputs():
    generator = torch.Generator().manual_seed(0)
    return [((torch.randint(0, 50, (2, 5), generator=generator), torch.randn(2, 1, 6, 6, generator=generator)), {})]


def _record(model, calls="all", folding=True, tmp_path=None, name="run"):
    """A recording; without ``folding``, every module scoped (none folded into its call, Sequential too)."""
    profiler = ModuleFunctionKernelProfiler(calls=calls)
    with contextlib.ExitStack() as stack:
        if not folding:
            stack.enter_context(mock.patch.object(instrument, "folds_into_its_call", lambda module: False))
            stack.enter_context(mock.patch.object(module_scopes, "only_calls_its_children", lambda module: False))
        frame, data = profiler.profile(model, _inputs(), warmup_iterations=1, out=tmp_path / name)
    scopes = list(profiler.run.sql("SELECT name FROM events WHERE name LIKE 'ks.%' ORDER BY event_id")["name"])
    return profiler, frame, scopes


@pytest.mark.parametrize("calls", ["all", "functional"])
def test_folded_scopes_give_the_rows_of_scopes_on_every_module(tmp_path, calls):
    model = Mixed().eval()
    _, folded, folded_scopes = _record(model, calls, True, tmp_path, "folded")
    _, plain, plain_scopes = _record(model, calls, False, tmp_path, "plain")
    assert len(folded_scopes) < len(plain_scopes)
    assert folded[ROW_COLUMNS].equals(plain[ROW_COLUMNS])
    assert {"conv", "norm", "embed", "head.0", "head.4"} <= set(folded["module_name"])


def test_which_modules_fold_and_how_their_scope_is_named(tmp_path):
    model = Mixed().eval()
    profiler, frame, scopes = _record(model, "all", True, tmp_path)
    with load_run(profiler.run_dir / "trace.json.gz") as bare:  # no manifest: the default annotation
        assert bare.profiling_df()[ROW_COLUMNS].equals(frame[ROW_COLUMNS])
    modules = {name.removeprefix("ks.module:") for name in scopes if name.startswith("ks.module:")}
    assert modules == {"", "reflect", "gate"}, "Sequential: no scope; folded leaves: no scope of their own"
    assert "ks.fn:conv2d#0@conv" in scopes and "ks.fn:embedding#0@embed" in scopes
    assert "ks.fn:batch_norm#0@norm" in scopes and "ks.fn:softmax#0@head.4" in scopes
    assert "ks.fn:pad#0" in scopes and "ks.fn:torch.sigmoid#0" in scopes, "calls of unfolded modules keep plain names"


def test_training_batch_norm_and_hooked_sequential_children_keep_their_scopes(tmp_path):
    model = Mixed().eval()
    model.norm.train()  # counts its batches with Tensor.add_ besides F.batch_norm
    model.head[1].register_forward_hook(lambda module, args, output: output.clone())  # a kernel inside head
    _, frame, scopes = _record(model, "all", True, tmp_path)
    assert "ks.module:norm" in scopes and "ks.module:head" in scopes
    hooked = frame[frame["function_name"] == "Tensor.clone"]
    assert len(hooked) and set(hooked["module_name"]) == {"head.1"}, "a hook is its module's work (hooked_calls.py)"


def test_diff_counts_a_folded_scope_as_a_call_of_its_module_and_its_function(tmp_path):
    model = Mixed().eval()
    folded, _, _ = _record(model, "all", True, tmp_path, "folded")
    plain, _, _ = _record(model, "all", False, tmp_path, "plain")
    table = diff(plain.run_dir, folded.run_dir)
    rows = table[table["level"].isin(["module", "function"])]
    assert len(rows) and (rows["calls_a"] == rows["calls_b"]).all(), rows


# Every class the recorder folds, with an input: its forward must launch all of its work inside the one
# functional call, under the installed torch. A class torch changed would show here, not in a wrong row.
FOLDED_CASES = [
    (nn.Linear(8, 4), [(2, 8)]),
    (nn.Bilinear(8, 8, 4), [(2, 8), (2, 8)]),
    (nn.Embedding(10, 4), "tokens"),
    (nn.LayerNorm(8), [(2, 8)]),
    (nn.RMSNorm(8), [(2, 8)]),
    (nn.GroupNorm(2, 4), [(2, 4, 3)]),
    (nn.LocalResponseNorm(2), [(2, 4, 3)]),  # F.local_response_norm calls F.pad and F.avg_pool2d inside
    (nn.Conv1d(4, 4, 3), [(2, 4, 6)]),
    (nn.Conv2d(4, 4, 3), [(2, 4, 6, 6)]),
    (nn.Conv3d(4, 4, 3), [(2, 4, 4, 4, 4)]),
    (nn.BatchNorm1d(4).eval(), [(2, 4)]),
    (nn.BatchNorm2d(4).eval(), [(2, 4, 3, 3)]),
    (nn.BatchNorm3d(4).eval(), [(2, 4, 2, 2, 2)]),
    *[(kind(), [(2, 8)]) for kind in (nn.ReLU, nn.ReLU6, nn.GELU, nn.SiLU, nn.Mish, nn.ELU, nn.LeakyReLU)],
    *[(kind(), [(2, 8)]) for kind in (nn.Hardtanh, nn.Hardswish, nn.Hardsigmoid, nn.GLU, nn.Softplus)],
    (nn.Softmax(-1), [(2, 8)]),
    (nn.LogSoftmax(-1), [(2, 8)]),
    (nn.MaxPool1d(2), [(2, 4, 6)]),
    (nn.MaxPool2d(2), [(2, 4, 6, 6)]),
    (nn.MaxPool3d(2), [(2, 4, 4, 4, 4)]),
    (nn.AvgPool1d(2), [(2, 4, 6)]),
    (nn.AvgPool2d(2), [(2, 4, 6, 6)]),
    (nn.AvgPool3d(2), [(2, 4, 4, 4, 4)]),
    (nn.AdaptiveAvgPool1d(2), [(2, 4, 6)]),
    (nn.AdaptiveAvgPool2d(2), [(2, 4, 6, 6)]),
    (nn.AdaptiveAvgPool3d(2), [(2, 4, 4, 4, 4)]),
    (nn.Upsample(scale_factor=2), [(2, 4, 3, 3)]),
    (nn.PixelShuffle(2), [(2, 4, 3, 3)]),
    (nn.Dropout(0.5).train(), [(2, 8)]),
    (nn.Dropout1d(0.5).train(), [(2, 4, 6)]),
    (nn.Dropout2d(0.5).train(), [(2, 4, 3, 3)]),
    (nn.Dropout3d(0.5).train(), [(2, 4, 2, 2, 2)]),
    (nn.AlphaDropout(0.5).train(), [(2, 8)]),
    (nn.FeatureAlphaDropout(0.5).train(), [(2, 4, 3, 3)]),
]


class Root(nn.Module):
    def __init__(self, leaf):
        super().__init__()
        self.leaf = leaf

    def forward(self, *inputs):
        return self.leaf(*inputs)


def test_the_folded_classes_are_exactly_the_cases_below():
    folded = {type(module) for module, _ in FOLDED_CASES}
    assert folded == module_scopes._SINGLE_CALL | set(module_scopes._CONVS) | set(module_scopes._BATCH_NORMS)


@pytest.mark.parametrize("module, shapes", FOLDED_CASES, ids=lambda case: type(case).__name__)
def test_a_folded_module_makes_one_call_holding_all_its_work(module, shapes, tmp_path):
    assert instrument.folds_into_its_call(module)
    generator = torch.Generator().manual_seed(0)
    if shapes == "tokens":
        inputs = (torch.randint(0, 10, (2, 3), generator=generator),)
    else:
        inputs = tuple(torch.randn(*shape, generator=generator) for shape in shapes)
    profiler = ModuleFunctionKernelProfiler(calls="functional")  # the mode that scopes the fewest calls
    frame, _ = profiler.profile(Root(module), [(inputs, {})], warmup_iterations=1, out=tmp_path / "run")
    scopes = list(profiler.run.sql("SELECT name FROM events WHERE name LIKE 'ks.%' ORDER BY ts_ns")["name"])
    assert scopes[0] == "ks.module:" and scopes[1].endswith("#0@leaf"), scopes
    assert not [name for name in scopes[2:] if "@" in name or name.startswith("ks.module:")], "one folded call"
    leaf_rows = frame[frame["module_name"] == "leaf"]
    assert len(frame) and len(leaf_rows) == len(frame), "all its work inside the leaf"
    assert frame["function_name"].notna().all(), "all its work inside its call"


def test_a_prefix_holding_the_separator_still_reads_folded_scopes():
    """ks_scope_folded skips cutting the name unless the function prefix holds the module separator; with a
    prefix that does ("f@:"), a folded scope is still told from a plain one, and ks_scope_module reads it."""
    import duckdb
    from kernelscope.analyzer.sql import define_scope_names

    con = duckdb.connect()
    define_scope_names(con, "m@:", "f@:")
    names = ["f@:linear#1@enc.fc", "f@:linear#1", "m@:enc", "aten::mm"]
    rows = con.execute(
        "SELECT ks_scope_folded(n), ks_scope_module(n), ks_scope_call(n) FROM unnest(?) AS t(n)", [names]
    ).fetchall()
    assert rows == [(True, "enc.fc", "linear#1"), (False, None, "linear#1"), (False, "enc", None), (False, None, None)]


@pytest.mark.parametrize("escaped", [True, False])
def test_escaped_scope_names_read_back_only_in_recordings_that_escape_them(escaped):
    """ks_scope_module and ks_scope_call read a %XX back where the recording escaped its names (names_escaped), and
    give the names as they are in other recordings."""
    import duckdb
    from kernelscope.analyzer.sql import define_scope_names

    con = duckdb.connect()
    define_scope_names(con, "ks.module:", "ks.fn:", names_escaped=escaped)
    names = ["ks.module:enc%2Elayers.0", "ks.fn:my%20fn#2@enc%23x", "ks.module:a+b", "ks.fn:f+g#1", None]
    rows = con.execute("SELECT ks_scope_module(n), ks_scope_call(n) FROM unnest(?) AS t(n)", [names]).fetchall()
    if escaped:
        assert rows == [("enc.layers.0", None), ("enc#x", "my fn#2"), ("a+b", None), (None, "f+g#1"), (None, None)]
    else:
        assert rows == [
            ("enc%2Elayers.0", None), ("enc%23x", "my%20fn#2"), ("a+b", None), (None, "f+g#1"), (None, None)
        ]  # fmt: skip


class _Relu6Forward:
    """A callable object set as a torch class's forward (no ``__get__``: the module's forward is not a bound method)."""

    def __call__(self, x):
        return torch.nn.functional.relu6(x)


def test_a_torch_class_whose_forward_is_no_function_keeps_its_own_scope(monkeypatch):
    monkeypatch.setattr(nn.ReLU, "forward", _Relu6Forward())
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval()
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 8),), {})])
    assert set(frame.loc[frame["function_name"] == "relu6", "module_name"]) == {"1"}


def _noisy_linear(self, x):  # a library's forward bound on torch's class: more than one call
    return nn.functional.linear(x, self.weight, self.bias) + torch.tanh(x @ self.weight.t())


def _active_dropout(self, x):  # Monte Carlo dropout in eval mode: its functional launches kernels
    return nn.functional.dropout(x, self.p, training=True)


def test_a_torch_class_whose_forward_a_library_replaced_keeps_its_scope(monkeypatch):
    """Folded (or, for a dropout, given no scope) by its class alone, its other work had no module: the kernels of
    ``self.weight.t()`` had none at all."""
    monkeypatch.setattr(nn.Linear, "forward", _noisy_linear)
    monkeypatch.setattr(nn.Dropout, "forward", _active_dropout)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.ReLU()).eval()
    assert not instrument.folds_into_its_call(model[0]) and not instrument.launches_no_kernel(model[1])
    assert instrument.folds_into_its_call(model[2]) and instrument.launches_no_kernel(model)
    with monkeypatch.context() as patched:
        patched.setattr(nn.Sequential, "forward", lambda self, x: torch.sigmoid(x))
        assert not instrument.launches_no_kernel(model), "a Sequential whose forward a library replaced"
    torch.manual_seed(0)
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(4, 8),), {})], warmup_iterations=1)
    assert frame["module_name"].notna().all(), frame[frame["module_name"].isna()]
    assert set(frame.loc[frame["function_name"].isin(["torch.tanh", "Tensor.__matmul__"]), "module_name"]) == {"0"}
    assert set(frame.loc[frame["function_name"] == "dropout", "module_name"]) == {"1"}
