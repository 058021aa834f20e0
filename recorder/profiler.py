"""ModuleFunctionKernelProfiler: aitune's API, recorded to a run directory and analyzed from it."""

from __future__ import annotations

import inspect
import numbers
import shutil
import tempfile
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import torch
from kernelscope.analyzer import describe_results as _describe_results
from kernelscope.analyzer import load_run
from kernelscope.analyzer.connection import prepare as prepare_connection
from kernelscope.analyzer.errors import KernelscopeError, RecordingBusyError, type_with_article
from torch import nn
from torch.nn import functional as F
from torch.profiler import ProfilerActivity, profile

from . import scope_gate
from .calls import patched_functions
from .compiled import record_keeping_compiled_code
from .git_head import git_commit_in_background
from .hierarchy import observed_modules
from .instrument import CALLS, instrumented
from .kineto_notices import quiet_start_and_stop
from .predictions import why_missed
from .retention import CappedSampleBook, hold_limit_bytes, warn_on_samples_not_kept
from .run_writer import (
    base_manifest,
    check_destination,
    checked_tags,
    run_destination,
    write_run,
)
from .sample_form import check_samples
from .samples import Sample, SampleBook
from .threads import model_threads
from .torchscript import torchscript_paths
from .usage_warnings import warn_if_no_call_named, warn_if_training
from .wrappers import patch_plan

DEFAULT_SAMPLE_TENSOR_LIMIT_MB = 256.0
DEFAULT_SAMPLE_MEMORY_LIMIT_MB = 1024.0
T = TypeVar("T")
_active = threading.Lock()  # one recording per process: the patches are global


class ModuleFunctionKernelProfiler:
    """Attribute every device kernel of one inference pass to its module and functional call.

    Args:
        function_names: functional calls whose input samples are collected (None = all, empty = none).
            It never filters kernel rows.
        sample_tensor_limit_mb: the run directory's samples.pt keeps the distinct input tensors when they
            total at most this many MiB (None = no limit, 0 = never); their metadata is always kept.
        sample_memory_limit_mb: the live inputs kept for ``function_data`` hold at most this many MiB of
            tensor storage (None = no cap). A signature past the cap is still counted and described, but
            holds TensorMeta in place of its tensors (and is left out of samples.pt); a warning says so.
            Apart from it, while recording, the inputs of every call of the last warm-up and the recorded
            pass are held until the pass is keyed, up to half the free GPU memory (RAM on the CPU), and let
            go before ``profile()`` returns (docs/format.md).
        calls: ``"all"`` (default) scopes every call that launches kernels: functionals however they are
            reached, torch-level calls outside functionals (``torch.addmm``, ``Tensor.add``…), CUDA graph
            replays, compiled regions. ``"functional"`` scopes only the ``torch.nn.functional`` namespace,
            as aitune's profiler does, for comparable numbers.
    """

    def __init__(
        self,
        function_names: set[str] | None = None,
        *,
        sample_tensor_limit_mb: float | None = DEFAULT_SAMPLE_TENSOR_LIMIT_MB,
        sample_memory_limit_mb: float | None = DEFAULT_SAMPLE_MEMORY_LIMIT_MB,
        calls: str = "all",
    ):
        if calls not in CALLS:
            raise ValueError(f"calls must be one of {CALLS}, not {calls!r}")
        if sample_memory_limit_mb is not None and not sample_memory_limit_mb >= 0:
            raise ValueError("sample_memory_limit_mb must be None or a number >= 0")
        if isinstance(function_names, str):  # set("linear") would be its letters
            raise TypeError(f"function_names is a set of names, not one string: {{{function_names!r}}}")
        self.function_names = None if function_names is None else set(function_names)
        self.calls = calls
        self.sample_tensor_limit_mb = sample_tensor_limit_mb
        self.sample_memory_limit_mb = sample_memory_limit_mb
        self.book = CappedSampleBook(None if sample_memory_limit_mb is None else int(sample_memory_limit_mb * 2**20))
        self.run = None  # the analyzer's Run of the last recording
        self.run_dir: Path | None = None
        self._scratch: str | None = None
        self._finalizer: weakref.finalize | None = None

    def profile(
        self,
        fn: Callable | None = None,
        data: Sequence[Sample] | None = None,
        *,
        module: nn.Module | None = None,
        warmup_iterations: int = 3,
        out: str | Path | None = None,
        overwrite: bool = False,
        tags: dict | None = None,
        function: Callable | None = None,
    ) -> tuple[pd.DataFrame, dict[str, list[tuple[int, Sample]]]]:
        """Warm up, record one pass over ``data`` and return ``(profiling_df, function_data)``.

        ``data`` is a sequence of ``(args, kwargs)`` pairs, one per call (anything else is a BadSamplesError,
        a ValueError). The run directory goes to ``out`` (kept; missing folders above it are created) or to a
        temporary directory removed when this profiler is released or profiles again. ``function=`` is ``fn``
        by the name aitune's profiler gives it.
        """
        if (fn is None) == (function is None):
            raise TypeError("profile() takes the model or function to run once: fn (or function=, as aitune names it)")
        fn = function if fn is None else fn
        if module is None and isinstance(fn, nn.Module):
            module = fn
        if module is None:
            raise ValueError(
                f"module must be provided when fn is not an nn.Module: fn is {type_with_article(fn)}; name the "
                "model it runs, profile(fn, module=model)"
            )
        if isinstance(warmup_iterations, bool) or not isinstance(warmup_iterations, numbers.Integral):
            given = "None" if warmup_iterations is None else type_with_article(warmup_iterations)
            raise TypeError(f"warmup_iterations is {given}, not a whole number of passes: warmup_iterations=3")
        if warmup_iterations < 0:
            raise ValueError("warmup_iterations must be greater than or equal to 0")
        tags = checked_tags(tags)
        if data is not None:
            check_samples(data)
        if out is not None:
            out = run_destination(Path(out))  # in a job of several ranks: out/rank-<rank>
            check_destination(out, overwrite)
        warn_if_training(module, stacklevel=2)
        if not _active.acquire(blocking=False):
            raise RecordingBusyError(
                None, "another kernelscope recording is running in this process; profile() is not re-entrant"
            )
        if torch_profiler_running():  # torch runs one profiler at a time: ours would end the user's
            _active.release()
            raise RecordingBusyError(
                None,
                "a torch.profiler session of your own is running in this process, and the recording's profiler "
                "would end it; call profile() outside it",
            )
        try:
            self._release()
            return self._profile(fn, data, module, warmup_iterations, out, overwrite, tags)
        except BaseException:
            self._release()  # a failed recording keeps no samples (live tensors) and no temporary directory
            raise
        finally:
            _active.release()

    def _profile(self, fn, data, module, warmup_iterations, out, overwrite, tags):
        # Work that does not need the model goes on threads while it warms up, and is awaited before the patched
        # passes (which it must not slow down).
        git_commit = git_commit_in_background()
        connection = prepare_connection()  # the analyzer's DuckDB connection (load_run takes it)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        # The last warm-up passes run with the scopes in place: the one before last keyed call by call (the
        # prediction of the recorded pass's sample ids), the last one a rehearsal of the recorded pass (record_pass).
        # The first ones do not, so that torch.compile compiles the model as the user runs it.
        patched_warm_ups = 2 if warmup_iterations >= 3 else min(warmup_iterations, 1)
        manifest = base_manifest(
            device=device,
            warmup_iterations=warmup_iterations,
            samples_per_pass=1 if data is None else len(data),
            tags=tags,
            calls=self.calls,
        )
        with model_threads(), torch.no_grad():  # a pool the model makes at its first call is the model's
            for _ in range(warmup_iterations - patched_warm_ups):
                _run_pass(fn, data)
        # read after the unpatched warm-ups: a submodule the model registers at its first call is scoped too
        named_modules = observed_modules(module)  # by identity (recorder/hierarchy.py)
        scripted = torchscript_paths(named_modules)  # their operators' module paths (recorder/torchscript.py)
        if scripted:
            manifest["annotation"]["torchscript_modules"] = scripted
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        book = self.book

        def recorded_pass():
            recording = profile(activities=activities, **profiler_options(with_modules=bool(scripted)))
            with quiet_cycle_warning(), quiet_start_and_stop(recording) as prof:
                with scope_gate.set_open(True):  # the profiler runs: a scope opened now is closed with it running
                    _run_pass(fn, data)
                if device == "cuda":
                    torch.cuda.synchronize()
                if not torch_profiler_running():  # its trace is gone: exporting it would crash the process
                    raise KernelscopeError(
                        None,
                        "the model ran a torch.profiler session of its own in the recorded pass, which ended the "
                        "recording's (torch runs one profiler at a time); record it with that session turned off",
                    )
            return prof

        warm_up = (lambda: _run_pass(fn, data)) if warmup_iterations > 0 else None
        rehearsal = warm_up if patched_warm_ups == 2 else None

        def patched_passes(functions: bool):
            # no scope opens until the recorded pass's profiler has started (scope_gate.py)
            patches = instrumented(named_modules, book, self.function_names, self.calls, functions)
            with scope_gate.set_open(False), torch.no_grad(), patches:
                manifest["git_commit"] = git_commit.result()
                connection.exception()  # made (a failure is raised by load_run, which makes one again)
                held = hold_limit_bytes(device, book)
                return record_pass(book, warm_up, recorded_pass, held, rehearsal)

        def unpatched_pass():
            with torch.no_grad():
                _run_pass(fn, data)

        with model_threads():
            recorded, manifest["compiled_code"] = record_keeping_compiled_code(
                patched_passes, unpatched_pass, book.reset
            )
        prof, manifest["sample_keys"], recordings = recorded
        if manifest["sample_keys"] == "per_call_after_miss":
            warnings.warn(
                why_missed(book, recordings)
                + ", so the recorded pass was keyed as each call was made"
                + (
                    f": the model ran {warmup_iterations + 2} passes, not {warmup_iterations + 1}"
                    if recordings > 1
                    else ""
                ),
                RuntimeWarning,
                stacklevel=3,
            )
        warn_on_samples_not_kept(book, self.sample_memory_limit_mb)
        manifest["sample_memory"] = book.report()
        temporary = out is None
        if temporary:
            self._scratch = tempfile.mkdtemp(prefix="kernelscope-")
            self._finalizer = weakref.finalize(self, shutil.rmtree, self._scratch, ignore_errors=True)
            out = Path(self._scratch)  # the run's own folder (write_run)
        limit = self.sample_tensor_limit_mb
        write_run(
            Path(out),
            prof,
            book,
            manifest,
            overwrite=overwrite,
            tensor_limit_bytes=None if limit is None else int(limit * 2**20),
            durable=not temporary,
        )
        self.run_dir = Path(out)
        self.run = load_run(self.run_dir, allow_empty=True)  # a model that ran no operator gets empty frames
        _warn_on_losses(self.run, self.run_dir)
        frame = self._in_process_frame(named_modules)
        warn_if_no_call_named(self.function_names, frame["function_name"], stacklevel=3)
        return frame, book.function_data()

    def _in_process_frame(self, named_modules: list[tuple[str, nn.Module]]) -> pd.DataFrame:
        frame = self.run.profiling_df()
        modules = dict(named_modules)
        frame.insert(1, "module", [modules.get(name) for name in frame["module_name"]])
        return frame

    def describe_results(self, profiling_df: pd.DataFrame, function_data: dict, top_k: int = 10) -> pd.DataFrame:
        """One row per function, most expensive first, at most ``top_k`` (None: all): function_name, calls,
        num_distinct_samples, num_modules, time_spent_us, time_spent_pct, tensor_size_MB (docs/sql.md, summary)."""
        return _describe_results(profiling_df, function_data, top_k)

    def get_functions_to_patch(self, module: Any = F) -> list[tuple[str, Any]]:
        """``(name, function)`` of each attribute of ``module`` (``torch.nn.functional``, ``torch``,
        ``torch.Tensor``…) that a recording with this profiler's ``calls`` runs in a scope of its own, the functions
        as they are outside a recording: aitune's method of the same name, by kernelscope's rule."""
        return patched_functions(patch_plan(self.calls, recording=_active.locked()), module)

    def _release(self) -> None:
        """Drop the previous recording: samples (live tensors), the analyzer's tables, a temporary run."""
        self.book.clear()
        if self.run is not None:
            self.run.close()
            self.run = None
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
            self._scratch = None
        self.run_dir = None

    def release(self) -> None:
        """Free what the last recording holds (also done when the profiler is garbage collected)."""
        self._release()


def record_pass(
    book: SampleBook,
    warm_up: Callable[[], Any] | None,
    recorded: Callable[[], T],
    hold_limit: int | None = None,
    rehearsal: Callable[[], Any] | None = None,
) -> tuple[T, str, int]:
    """Run the patched warm-up pass (if any), the rehearsal (if any), then ``recorded()``, with ``book`` keying
    the calls as ``profile()`` does; returns the recorded result, how its samples were keyed (manifest
    ``sample_keys``) and how many times ``recorded`` ran (2 after a wrong prediction):

    - ``predicted``: the recorded pass named each call's sample id from the warm-up's calls and held its
      inputs; keyed after the pass, every prediction was right (SampleBook);
    - ``per_call``: no warm-up, or the warm-up's inputs did not fit in ``hold_limit`` bytes (None = no
      limit): keyed as each call was made;
    - ``per_call_after_miss``: a prediction was wrong (the model's calls differ between passes), so the
      pass was recorded again, keyed per call; or the rehearsal called a function the warm-up did not, so
      the recorded pass was keyed per call.

    The rehearsal is one more warm-up pass made exactly like the recorded one (sample ids predicted, inputs
    held, nothing keyed). Python re-specializes the code a pass runs over its first passes after a change
    of the patched functions, and the keyed warm-up runs other code: a recorded pass right after the keyed
    warm-up runs measurably slower than one after a rehearsal (benchmarks/RESULTS.md, "The recorded pass must not
    be the second pass after patching"; benchmarks/warm_up_variants.py).
    """
    predicted = False
    if warm_up is not None:
        book.watch_warm_up(hold_limit)
        warm_up()
        predicted = book.predict_next_pass()
        if predicted and rehearsal is not None:
            rehearsal()
            if not book.predict_again():
                return recorded(), "per_call_after_miss", 1
    result = recorded()
    if not predicted:
        return result, "per_call", 1
    if book.confirm_predictions():
        return result, "predicted", 1
    book.reset()
    return recorded(), "per_call_after_miss", 2


def torch_profiler_running() -> bool:
    """Whether a torch.profiler (or torch.autograd.profiler) session is running in this process: torch's own flag,
    which every start and stop sets, on whichever thread (``_profiler_enabled()`` sees only the calling thread's, and
    not a session that follows all threads)."""
    return bool(torch.autograd.profiler._is_profiler_enabled) or torch._C._autograd._profiler_enabled()


def profiler_options(with_modules: bool = False) -> dict:
    """torch.profiler.profile options of a recording, as far as this torch has them; ``with_modules``: the module path
    of each TorchScript operator (a model holding TorchScript modules: recorder/torchscript.py).

    ``acc_events=True`` (one cycle only) silences torch's warning that events are cleared at the end of a
    cycle, but without ``trace_only`` it also makes torch build its Python event objects when the profiler
    stops, which kernelscope never reads (a cost per trace event: benchmarks/RESULTS.md); then the
    option is left out and the warning filtered (``quiet_cycle_warning``)."""
    config = experimental_config()
    options = {"experimental_config": config, **({"with_modules": True} if with_modules else {})}
    if "acc_events" in inspect.signature(profile.__init__).parameters and getattr(config, "trace_only", False):
        options["acc_events"] = True
    return options


@contextmanager
def quiet_cycle_warning() -> Iterator[None]:
    """Hide torch's warning that a profiler cycle's events are cleared: a recording has one cycle."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
        yield


def experimental_config():
    """Follow every thread (kernels launched from other threads get their operators and scopes) and skip
    building torch's Python event objects, which kernelscope never reads, where this torch offers it."""
    from torch._C._profiler import _ExperimentalConfig

    for options in ({"profile_all_threads": True, "trace_only": True}, {"profile_all_threads": True}, {}):
        try:
            return _ExperimentalConfig(**options)
        except TypeError:
            continue
    return None


def _run_pass(fn: Callable, data: Sequence[Sample] | None) -> None:
    if data is None:
        fn()
        return
    for args, kwargs in data:
        fn(*args, **kwargs)


def _warn_on_losses(run, run_dir: Path) -> None:
    check = run.launch_check()
    if not check.ok:
        warnings.warn(
            f"{run_dir}: the profiler lost events: {check.launches_without_device_event} of {check.launches} "
            f"launches have no device event and {check.device_events_without_launch} of "
            f"{check.device_events} device events have no launch; their time is still in the rows, "
            "but attribution of those kernels is incomplete",
            RuntimeWarning,
            stacklevel=3,
        )
