"""A forward that returns a generator, a coroutine (``async def forward``) or an async generator: its code runs when
the caller iterates or awaits it, after the forward returned, and its calls belong to the module whose code makes them,
not to the caller's (recorder/lazy_results.py). The result the caller gets behaves as the original would: values
sent, exceptions thrown, close and return values pass through, and it is of the same kind."""

import asyncio
import collections
import inspect
import types

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.instrument import instrumented  # noqa: E402
from kernelscope.recorder.samples import SampleBook  # noqa: E402
from reference import assert_matches_reference  # noqa: E402
from torch import nn  # noqa: E402


class Heads(nn.Module):
    """Yields one head at a time: its gelu and mul run when the caller asks for the next head."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])

    def forward(self, x):
        for layer in self.layers:
            yield F.gelu(layer(x)) * 2


class Consumer(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = Heads()

    def forward(self, x):
        return torch.stack([F.relu(head) for head in self.heads(x)])


def _drive(coroutine):
    """Runs a coroutine that awaits nothing but ``asyncio.sleep(0)`` (asyncio.run would repr its task's result)."""
    while True:
        try:
            coroutine.send(None)
        except StopIteration as stop:
            return stop.value


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    async def forward(self, x):
        await asyncio.sleep(0)
        return F.silu(self.fc(x))


class Stream(nn.Module):
    async def forward(self, x):
        for _ in range(2):
            await asyncio.sleep(0)
            yield F.softplus(x)


class AwaitsItsChildren(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate, self.stream = Gate(), Stream()

    def forward(self, x):
        async def both():
            y = await self.gate(x)
            return torch.stack([F.tanh(z) async for z in self.stream(y)])

        return _drive(both())


def _calls_by_module(frame) -> dict:
    named = frame.dropna(subset=["function_name"])
    return {name: set(group["function_name"]) for name, group in named.groupby("module_name")}


def test_a_generators_calls_belong_to_the_module_whose_forward_made_it(tmp_path):
    model, x = Consumer().eval(), torch.randn(4, 8)
    with torch.no_grad():
        expected = model(x)
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((x,), {})], out=tmp_path / "run")
    by_module = _calls_by_module(frame)
    assert by_module["heads"] == {"gelu", "Tensor.__mul__"}, "resumed in Heads' scope, not the consumer's"
    assert by_module[""] == {"relu", "torch.stack"}
    assert by_module["heads.layers.0"] == by_module["heads.layers.1"] == {"linear"}
    assert [calls for calls, _ in data["gelu"]] == [2], "each call once"
    with load_run(tmp_path / "run") as run:
        assert_matches_reference(run, tmp_path / "run" / "trace.json.gz")
    with torch.no_grad():
        assert torch.equal(model(x), expected)
    assert "forward" not in vars(model.heads)


def test_coroutines_and_async_generators_are_resumed_in_their_modules_scope():
    model, x = AwaitsItsChildren().eval(), torch.randn(4, 8)
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((x,), {})])
    by_module = _calls_by_module(frame)
    assert by_module["gate"] == {"silu"} and by_module["gate.fc"] == {"linear"}
    assert by_module["stream"] == {"softplus"}
    assert by_module[""] == {"tanh", "torch.stack"}
    assert [calls for calls, _ in data["softplus"]] == [2]


class Echo(nn.Module):
    """A generator using the whole protocol: values sent in, an exception thrown in and handled, a return value."""

    def __init__(self):
        super().__init__()
        self.closed = False

    def forward(self, x):
        try:
            received = yield F.relu(x)
            try:
                yield received * 2
            except KeyError as exc:
                yield exc.args[0]
            return "done"
        finally:
            self.closed = True


def test_the_scoped_generator_passes_send_throw_close_and_return_through():
    model, book = Echo(), SampleBook()
    with instrumented([("", model)], book, None):
        generator = model(torch.ones(2))
        assert isinstance(generator, types.GeneratorType)
        assert torch.equal(next(generator), torch.ones(2))
        assert torch.equal(generator.send(torch.full((2,), 3.0)), torch.full((2,), 6.0))
        assert generator.throw(KeyError("handled")) == "handled"
        with pytest.raises(StopIteration) as stop:
            next(generator)
        assert stop.value.value == "done" and model.closed
        model.closed = False
        unfinished = model(torch.ones(2))
        next(unfinished)
        unfinished.close()
        assert model.closed, "close() reaches the original's finally"
        assert inspect.getgeneratorstate(unfinished) == inspect.GEN_CLOSED
    assert "forward" not in vars(model)


class Countdown(nn.Module):
    def __init__(self):
        super().__init__()
        self.closed = False

    async def forward(self, n):
        try:
            while n:
                await asyncio.sleep(0)
                n = (yield n) or n - 1
        except ValueError:
            yield "thrown"
        finally:
            self.closed = True


def test_the_scoped_async_generator_passes_asend_athrow_and_aclose_through():
    model, book = Countdown(), SampleBook()

    async def use():
        stream = model(3)
        assert isinstance(stream, types.AsyncGeneratorType)
        seen = [await stream.__anext__(), await stream.asend(None), await stream.asend(9)]
        seen.append(await stream.athrow(ValueError()))
        await stream.aclose()
        seen.append(model.closed)
        return seen

    with instrumented([("", model)], book, None):
        assert _drive(use()) == [3, 2, 9, "thrown", True], "aclose() reaches the original's finally"


class Documented(nn.Module):
    def forward(self, x: torch.Tensor, scale: float = 2.0) -> torch.Tensor:
        """Scales x."""
        return F.relu(x) * scale


def _what_the_program_sees(function) -> tuple:
    return (
        inspect.iscoroutinefunction(function), asyncio.iscoroutinefunction(function),
        inspect.isasyncgenfunction(function), inspect.isgeneratorfunction(function), inspect.signature(function),
        function.__name__, function.__qualname__, function.__doc__, function.__module__,
        getattr(function, "__annotations__", None), inspect.ismethod(function), getattr(function, "__self__", None),
    )  # fmt: skip


@pytest.mark.parametrize("kind", [Gate, Stream, Heads, Echo, Countdown, Documented, nn.ReLU])
def test_a_scoped_forward_is_of_its_originals_kind_and_signature(kind):
    """A program asks what its forward is while it is recorded (asyncio's dispatch, ``inspect.signature``,
    ``inspect.ismethod``, ``forward.__self__``): the wrapper answers as the original, a method bound to the module,
    does, and a coroutine or async generator it returns still runs in the module's scope (nn.ReLU: folded)."""
    model = kind()
    seen_before, original = _what_the_program_sees(model.forward), type(model).forward
    with instrumented([("", model)], SampleBook(), None):
        assert "forward" not in vars(model), "scoped by its _call_impl: its forward is its class's"
        assert _what_the_program_sees(model.forward) == seen_before
        assert _what_the_program_sees(type(model).forward) == _what_the_program_sees(original), "its class's too"
        if not inspect.isasyncgenfunction(original):  # its code kept: a wrapper in its class (forward_codes.py)
            assert model.forward.__func__ is original and type(model).forward is original
    assert "forward" not in vars(model)


def test_a_scoped_forward_set_on_the_instance_is_what_it_was():
    """A forward the module holds as an instance attribute (a function, not a method) is scoped as one."""
    model, calls = nn.Module(), []
    model.forward = lambda x: calls.append(F.relu(x)) or calls[-1]
    seen_before, original = _what_the_program_sees(model.forward), model.forward
    with instrumented([("", model)], SampleBook(), None):
        assert vars(model)["forward"] is not original, "the forward is scoped"
        assert _what_the_program_sees(model.forward) == seen_before
        model(torch.ones(2))
    assert vars(model)["forward"] is original and len(calls) == 1


Tokens = collections.namedtuple("Tokens", "stream length")


class Lazy(nn.Module):
    """Returns its lazy results inside what the caller unpacks: a tuple, a named tuple, a list it also keeps, a dict,
    and lazy iterators other than generators (a map over a functional, a filter whose test calls one)."""

    def __init__(self, form):
        super().__init__()
        self.form, self.kept = form, None

    def rows(self, x):
        for row in x:
            yield F.gelu(row)

    def forward(self, x):
        if self.form == "tuple":
            return self.rows(x), len(x)
        if self.form == "named tuple":
            return Tokens(self.rows(x), len(x))
        if self.form == "list":
            self.kept = [self.rows(x)]
            return self.kept
        if self.form == "dict":
            return {"stream": self.rows(x), "length": len(x)}
        if self.form == "map":
            return map(F.gelu, x)
        return filter(lambda row: bool(F.gelu(row).sum() > -1), x)


class Unpacks(nn.Module):
    def __init__(self, form):
        super().__init__()
        self.lazy, self.form, self.seen = Lazy(form), form, []

    def forward(self, x):
        result = self.lazy(x)
        self.seen.append(result)
        if self.form in ("tuple", "named tuple", "list"):
            rows = result[0]
        elif self.form == "dict":
            rows = result["stream"]
        else:
            rows = result
        return torch.stack([F.relu(row) for row in rows])


@pytest.mark.parametrize("form", ["tuple", "named tuple", "list", "dict", "map", "filter"])
def test_lazy_results_held_in_a_result_or_of_other_types_run_in_their_modules_scope(form):
    model, x = Unpacks(form).eval(), torch.randn(3, 8)
    with torch.no_grad():
        expected = model(x)
    unrecorded = model.seen[-1]
    frame, data = ModuleFunctionKernelProfiler().profile(model, [((x,), {})], warmup_iterations=2)
    by_module = _calls_by_module(frame)
    assert "gelu" in by_module["lazy"], "resumed in Lazy's scope (iterating x, the filter's test too)"
    assert by_module[""] == {"relu", "torch.stack"}, "nothing of Lazy's in the caller's"
    assert [calls for calls, _ in data["gelu"]] == [3]
    recorded = model.seen[-1]
    assert type(recorded) is type(unrecorded), "the caller gets a result of the type the forward returned"
    if form == "list":
        assert recorded is model.lazy.kept, "a list is the very list the forward returned"
    with torch.no_grad():
        assert torch.equal(model(x), expected)
