"""dynamo fills its tables of torch functions (``trace_rules``: which functions it puts in a graph, which Tensor
methods it allows) by name at their first use in a process. Made inside a recording (a model whose first call,
profiled, compiles), they held the recorder's wrappers instead of torch's functions, and for the rest of the process
dynamo refused ``torch.layer_norm`` ("Attempted to call function marked as skipped") in every fullgraph compile and
higher-order op (``map``, ``cond``, ``while_loop``). torch.overrides' tables (``resolve_name``,
``get_overridable_functions``), made at a logging mode's first call while recorded, held the wrappers too:
``resolve_name(F.gelu)`` was None for the rest of the process."""

import functools

import pytest

torch = pytest.importorskip("torch")
import torch._dynamo.trace_rules as trace_rules  # noqa: E402
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from torch import nn  # noqa: E402


def _normed(x):
    return torch.layer_norm(x, (8,)).relu().add(1)


class CompilesAtFirstCall(nn.Module):
    def __init__(self, empties_tables: bool = False):
        super().__init__()
        self.fc, self.empties_tables = nn.Linear(8, 8), empties_tables
        self.compiled = None

    def forward(self, x):
        if self.compiled is None:
            if self.empties_tables:
                trace_rules.clear_lru_cache()  # what init_process_group does, here in the forward
            self.compiled = torch.compile(_normed, backend="eager", fullgraph=True)
        return F.gelu(self.compiled(self.fc(x)))


@pytest.mark.parametrize("warmup", [0, 1])
def test_dynamo_tables_filled_while_recorded_hold_torch_functions_afterwards(warmup):
    torch._dynamo.reset()
    trace_rules.clear_lru_cache()  # as in a process where dynamo has not traced yet
    try:
        model = CompilesAtFirstCall().eval()
        frame, _ = ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2, 8),), {})], warmup_iterations=warmup)
        assert "gelu" in set(frame["function_name"])
        assert torch.layer_norm in trace_rules.get_torch_obj_rule_map()
        assert torch.Tensor.relu in trace_rules.get_tensor_method()

        def other(x):  # a compile after the recording, as the user's next one
            return torch.layer_norm(x, (8,)) * 2

        x = torch.randn(2, 8)
        torch.testing.assert_close(torch.compile(other, backend="eager", fullgraph=True)(x), other(x))
    finally:
        torch._dynamo.reset()
        trace_rules.clear_lru_cache()


def test_dynamo_tables_emptied_and_refilled_while_recorded_are_emptied_afterwards():
    torch._dynamo.reset()
    try:
        model = CompilesAtFirstCall(empties_tables=True).eval()
        ModuleFunctionKernelProfiler().profile(model, [((torch.randn(2, 8),), {})], warmup_iterations=0)
        assert torch.layer_norm in trace_rules.get_torch_obj_rule_map()
        assert torch.Tensor.relu in trace_rules.get_tensor_method()
    finally:
        torch._dynamo.reset()
        trace_rules.clear_lru_cache()


_OVERRIDES_TABLES = ("_get_overridable_functions", "get_ignored_functions", "get_testing_overrides",
                     "_get_tensor_methods", "get_default_nowrap_functions")  # fmt: skip


class Names(torch.overrides.TorchFunctionMode):
    """Names each call it is handed, as a logging mode does: torch.overrides' tables are made at its first call."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.append(torch.overrides.resolve_name(func))
        return func(*args, **(kwargs or {}))


class NamesItsCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        torch._dynamo.variables.torch.get_overridable_functions()  # dynamo's own, as at its first compile
        with Names():
            return F.gelu(self.fc(x))


def test_torch_overrides_tables_first_made_while_recorded_hold_torch_functions_afterwards():
    import torch._dynamo.variables.torch as dynamo_torch

    for name in _OVERRIDES_TABLES:
        getattr(torch.overrides, name).cache_clear()  # as in a process where nothing asked them yet
    dynamo_torch.get_overridable_functions.cache_clear()
    ModuleFunctionKernelProfiler().profile(NamesItsCalls().eval(), [((torch.randn(2, 8),), {})], warmup_iterations=0)
    assert torch.overrides.resolve_name(F.gelu) == "torch.nn.functional.gelu", "the names of torch's functions"
    assert torch.overrides.resolve_name(torch.Tensor.relu) == "torch.Tensor.relu"
    assert torch.layer_norm in torch.overrides.get_overridable_functions()[torch]
    assert torch.layer_norm in torch.overrides.get_testing_overrides()
    assert torch.layer_norm not in torch.overrides.get_ignored_functions()
    assert F.gelu in dynamo_torch.get_overridable_functions()


class AsksTheTables(nn.Module):
    """Takes its branch by what torch.overrides' tables say of the functions it is about to call."""

    def __init__(self):
        super().__init__()
        self.fc, self.answers = nn.Linear(8, 8), []

    def forward(self, x):
        table = torch.overrides.get_overridable_functions()
        answers = (F.gelu in table[F], torch.add in table[torch], torch.Tensor.add in table[torch.Tensor],
                   torch.overrides.resolve_name(F.layer_norm), torch.overrides.resolve_name(torch.Tensor.add),
                   torch.overrides.is_tensor_method_or_property(torch.Tensor.mul),
                   F.hardswish in torch.overrides.get_ignored_functions())  # fmt: skip
        self.answers.append(answers)
        return F.gelu(self.fc(x)) if all(answers) else x


def test_a_forward_asking_torch_overrides_tables_about_a_patched_function_gets_the_unrecorded_answer():
    """``resolve_name(F.layer_norm)`` in a forward was None while recorded (``F.layer_norm`` is the wrapper there,
    the tables hold torch's functions), ``F.gelu in get_overridable_functions()[F]`` False: the forward took
    another branch. Afterwards the tables hold torch's functions alone again."""
    model, x = AsksTheTables().eval(), torch.randn(2, 8)
    index_size = len(torch.overrides._get_overridable_functions()[1])
    with torch.no_grad():
        model(x)
    frame, _ = ModuleFunctionKernelProfiler().profile(model, [((x,), {})], warmup_iterations=1)
    assert model.answers[-1] == model.answers[0] and all(model.answers[0])
    assert "gelu" in set(frame["function_name"])
    assert len(torch.overrides._get_overridable_functions()[1]) == index_size
    assert not any(f.__module__ == "kernelscope.recorder.wrappers" for f in torch.overrides.get_ignored_functions()
                   if hasattr(f, "__module__"))  # fmt: skip


def _tables_seen_in_block(originals, wrappers):
    from kernelscope.recorder.dynamo_tables import overrides_tables_naming_wrappers

    (by_namespace, index), methods, ignored = (torch.overrides._get_overridable_functions(),
                                               torch.overrides._get_tensor_methods(),
                                               torch.overrides.get_ignored_functions())  # fmt: skip
    with overrides_tables_naming_wrappers(originals, wrappers):
        return ({w: index.get(w) for w in wrappers.values()}, {w for w in wrappers.values() if w in methods},
                {w for w in wrappers.values() if w in ignored},
                {namespace: [f for f in functions if f in wrappers.values()]
                 for namespace, functions in by_namespace.items()})  # fmt: skip


def test_torch_overrides_entries_of_the_wrappers_read_once_per_plan_and_again_where_a_table_changed():
    """The wrappers' entries are worked out once per plan and tables (dynamo_tables._entries_of_wrappers): a second
    block with the same plan gets the same entries from what the first read, and an original added to a table
    between them gets its wrapper's entry in the next block."""
    from kernelscope.recorder import dynamo_tables

    def not_in_any_table(x):
        return x

    def wrapper(*args, **kwargs):
        return None

    originals = {id(F.gelu): F.gelu, id(torch.Tensor.add): torch.Tensor.add, id(not_in_any_table): not_in_any_table}
    wrappers = {key: functools.wraps(original)(functools.partial(wrapper)) for key, original in originals.items()}
    first = _tables_seen_in_block(originals, wrappers)
    made = dynamo_tables._entries[2]
    assert first[0][wrappers[id(F.gelu)]] == "torch.nn.functional.gelu"
    assert first[1] == {wrappers[id(torch.Tensor.add)]} and first[3][F] == [wrappers[id(F.gelu)]]
    assert _tables_seen_in_block(originals, wrappers) == first
    assert dynamo_tables._entries[2] is made, "the second block read the originals again"
    ignored = torch.overrides.get_ignored_functions()
    ignored.add(not_in_any_table)
    try:
        third = _tables_seen_in_block(originals, wrappers)
    finally:
        ignored.discard(not_in_any_table)
    assert third[2] == first[2] | {wrappers[id(not_in_any_table)]}
    assert _tables_seen_in_block(originals, wrappers) == first
    assert wrappers[id(F.gelu)] not in torch.overrides._get_overridable_functions()[1], "taken out after the block"
