"""How a recorded pass under compiled_code_kept's stance (``skip_guard_eval_unsafe``) fails where the model would
not: profile() then compiles the frame unpatched, or records with module scopes only (compiled.py,
``record_keeping_compiled_code``)."""

from __future__ import annotations

import sys

_REFUSED = "Recompilation triggered with skip_guard_eval_unsafe stance"


def recompile_refused(error: BaseException) -> bool:
    """Whether ``error`` is torch refusing to compile a frame under ``compiled_code_kept``'s stance."""
    return isinstance(error, RuntimeError) and str(error).startswith(_REFUSED)


def ran_another_objects_entry(error: BaseException) -> bool:
    """Whether ``error`` was raised by a compiled entry's own code (dynamo's bytecode, not the model's), as happens
    where the stance runs an entry compiled for other objects: it runs only the guards that failed before, so a frame
    that many models share (torch.cond's wrapper, made afresh at each call and compiled for the first model that ran
    it) runs the first model's entry for the next, whose code reads the first model's modules from the next one's
    (``KeyError: 'yes'``, a submodule of the first). An unpatched pass then runs with every guard: the model's own
    error raises there, and a frame it misses is compiled for it."""
    trace = error.__traceback__
    if trace is None or not isinstance(error, Exception):
        return False
    while trace.tb_next is not None:
        trace = trace.tb_next
    code = trace.tb_frame.f_code
    entries_of = getattr(sys.modules.get("torch._dynamo.eval_frame"), "_debug_get_cache_entry_list", None)
    original = _code_compiled_from(code)
    if entries_of is None or original is None:
        return False
    try:
        return any(entry.code is code for entry in entries_of(original))
    except (TypeError, RuntimeError):  # not a frame dynamo keeps entries for
        return False


def _code_compiled_from(code) -> object | None:
    """The code dynamo compiled ``code`` from, among the codes it has seen (same file, name and first line)."""
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    seen = getattr(getattr(convert_frame, "input_codes", None), "seen", ())
    for ref in list(seen):
        original = ref()
        if (
            original is not None
            and original.co_name == code.co_name
            and original.co_firstlineno == code.co_firstlineno
            and original.co_filename == code.co_filename
        ):
            return original
    return None


def refused_under_stance(error: BaseException) -> bool:
    """Whether a recorded pass failed by the stance (``recompile_refused``, ``ran_another_objects_entry``)."""
    return recompile_refused(error) or ran_another_objects_entry(error)
