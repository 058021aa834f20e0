"""How a recorded pass under compiled_code_kept's stance (``skip_guard_eval_unsafe``) fails where the model would
not: profile() then compiles the frame unpatched, or records with module scopes only (compiled.py,
``record_keeping_compiled_code``)."""

from __future__ import annotations

from collections.abc import Callable

_REFUSED = "Recompilation triggered with skip_guard_eval_unsafe stance"


def recompile_refused(error: BaseException) -> bool:
    """Whether ``error`` is torch refusing to compile a frame under ``compiled_code_kept``'s stance."""
    return isinstance(error, RuntimeError) and str(error).startswith(_REFUSED)


def ran_another_objects_entry(error: BaseException, entries: dict) -> bool:
    """Whether ``error`` was raised by a compiled entry's own code (dynamo's bytecode, not the model's), as happens
    where the stance runs an entry compiled for other objects: it runs only the guards that failed before, so a frame
    that many models share (torch.cond's wrapper, made afresh at each call and compiled for the first model that ran
    it) runs the first model's entry for the next, whose code reads the first model's modules from the next one's
    (``KeyError: 'yes'``, a submodule of the first). An unpatched pass then runs with every guard: the model's own
    error raises there, and a frame it misses is compiled for it. ``entries``: compiled.compiled_entries()."""
    trace = error.__traceback__
    if trace is None or not isinstance(error, Exception):
        return False
    while trace.tb_next is not None:
        trace = trace.tb_next
    code = trace.tb_frame.f_code
    return any(entry.code is code for cached in entries.values() for entry in cached)


def refused_under_stance(error: BaseException, entries: Callable[[], dict]) -> bool:
    """Whether a recorded pass failed by the stance (``recompile_refused``, ``ran_another_objects_entry`` of what
    ``entries`` gives: compiled.compiled_entries)."""
    return recompile_refused(error) or ran_another_objects_entry(error, entries())
