"""torch.compile'd code under the recorder: it must run what it compiled without the recorder.

- A compiled module's call gets the scope of the call ``torch.compile`` (``compiled_forward``); the modules inside it
  are not patched (instrument.py).
- Every wrapper steps aside while dynamo traces it (``dynamo_tracing``), so a compile made while the functions are
  patched sees the patched function itself: the graph is the model's own.
- While patched, compiled code runs the entries compiled before the patches (``compiled_code_kept``).
- What torch.profiler imports at its first start is imported before the patches
  (``import_what_the_profiler_imports``).
"""

from __future__ import annotations

import inspect
import sys
from contextlib import nullcontext
from typing import Any

import torch

from .calls import INSIDE_CALL

_Scope = torch._C._profiler._RecordFunctionFast
# A wrapper's first test: tracing its ContextVar and sample bookkeeping broke dynamo's graphs and mis-traced the
# ContextVar (a reduce-overhead block crashed on the H200). A plain Python function: about 25 ns a call.
dynamo_tracing = torch.compiler.is_dynamo_compiling


def optimized_module_type():
    """The class of torch.compile'd modules, or None where dynamo is not loaded."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")  # not imported: nothing was compiled
    return getattr(eval_frame, "OptimizedModule", None)


def compiled_forward(forward: Any, scope_name: str, call: Any):
    """A compiled module's forward in its module scope and the call scope ``call(args, kwargs)`` names; the torch-level
    calls its compiled code makes (eager parts between graphs) are its own (INSIDE_CALL)."""

    def compiled_in_scope(*args, **kwargs):
        if dynamo_tracing():
            return forward(*args, **kwargs)
        with _Scope(scope_name), _Scope(call(args, kwargs)):
            token = INSIDE_CALL.set(True)
            try:
                return forward(*args, **kwargs)
            finally:
                INSIDE_CALL.reset(token)

    return compiled_in_scope


def import_what_the_profiler_imports() -> None:
    """torch.profiler's first start in a process runs ``hasattr(torch, "_inductor")`` (torch 2.11–2.13), which imports
    inductor, dynamo and sympy (about 4 s on the H200 host, paid by plain torch.profiler as well). Done before the
    patches: module code run while they are in place would keep the wrappers in its tables of torch functions (dynamo's
    constant-folded functions, for one) for the rest of the process."""
    hasattr(torch, "_inductor")


def compiled_code_kept():
    """While the functions are patched, torch.compile runs the code it compiled before, unguarded.

    Compiled code guards the identity of the functions it traced (``F.linear``…): patched, they fail the guards, and
    dynamo would compile the model again inside the recorded passes, through the wrappers, with graph breaks at each
    (measured on the CPU: "Torch-Compiled Region: 0/1", and kernels of the compiled block owned by eager ``linear``
    and ``gelu`` calls). profile()'s first warm-up passes run unpatched, so the model's frames are compiled for the
    inputs the recorded pass will see; ``set_stance(skip_guard_eval_unsafe=True)`` then runs only the guards that
    tell a frame's compiled entries apart (shapes), not those the patches fail; the user's backend is kept. Where the
    model has not run unpatched first (``keep_compiled=False``), the user set another stance, or torch lacks the
    option, dynamo compiles the model again, through wrappers that step aside while it traces them. A frame first
    compiled in a patched pass (one the unpatched passes never ran) is refused by torch under this stance, loudly."""
    set_stance = getattr(torch.compiler, "set_stance", None)
    if set_stance is None or "skip_guard_eval_unsafe" not in inspect.signature(set_stance).parameters:
        return nullcontext()
    current = getattr(sys.modules.get("torch._dynamo.eval_frame"), "_stance", None)
    if getattr(current, "stance", None) != "default":  # the user's own stance (eager_then_compile…) is left alone
        return nullcontext()
    return set_stance("default", skip_guard_eval_unsafe=True, force_backend=current.backend)
