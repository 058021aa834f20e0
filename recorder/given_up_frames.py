"""Compiled frames dynamo has given up on: at their recompile limit, a miss runs the frame eagerly (dynamo marks it
``RUN_ONLY``), and compiles nothing more. Under compiled_code_kept's stance torch refuses such a miss instead
(transformers' shared ``*args`` forward decorator, filled by the program's own compiles of several models, made the
recording of the next model fall back to module scopes): while recorded they run eagerly, as their misses do
unrecorded.
"""

from __future__ import annotations

import sys
import types
import warnings
from collections.abc import Iterator
from contextlib import contextmanager


def given_up_codes(entries: dict[types.CodeType, list]) -> list[types.CodeType]:
    """The frames of ``entries`` (compiled.compiled_entries) whose next miss dynamo would not compile: as many entries
    as ``recompile_limit`` that guard no live object by identity (those count only for calls with the same objects,
    so are left out), or as many as ``accumulated_recompile_limit`` in all."""
    config = sys.modules.get("torch._dynamo.config")
    limit, accumulated = getattr(config, "recompile_limit", None), getattr(config, "accumulated_recompile_limit", None)
    if limit is None or accumulated is None:
        return []
    return [
        code
        for code, found in entries.items()
        if len(found) >= accumulated or sum(not _matches_by_identity(entry) for entry in found) >= limit
    ]


def _matches_by_identity(entry) -> bool:
    matched = getattr(getattr(entry, "guard_manager", None), "id_matched_objs", None) or {}
    return any(ref() is not None for ref in matched.values())


@contextmanager
def run_eagerly(codes: list[types.CodeType]) -> Iterator[None]:
    """Run ``codes`` eagerly in the block, what they call in dynamo's run-only mode (as dynamo runs a miss of a frame
    at its limit); after it, they are left as dynamo leaves a frame at its limit."""
    strategies = _strategies()
    if strategies is None or not codes:
        yield
        return
    set_strategy, eager, run_only = strategies
    for code in codes:
        set_strategy(code, eager)
    try:
        yield
    finally:
        for code in codes:
            set_strategy(code, run_only)


def _strategies():
    """``(set_code_exec_strategy, run eagerly, run only)`` where this torch has them, else None."""
    set_strategy = getattr(getattr(getattr(sys.modules.get("torch._C"), "_dynamo", None), "eval_frame", None),
                           "set_code_exec_strategy", None)  # fmt: skip
    dynamo_types = sys.modules.get("torch._dynamo.types")
    action, strategy = getattr(dynamo_types, "FrameAction", None), getattr(dynamo_types, "FrameExecStrategy", None)
    if set_strategy is None or action is None or strategy is None:
        return None
    return set_strategy, strategy(action.SKIP, action.RUN_ONLY), strategy(action.RUN_ONLY, action.RUN_ONLY)


def warn_given_up(codes: list[types.CodeType]) -> None:
    """Say which frames ran eagerly while recorded (``run_eagerly``), where any did."""
    if codes:
        warnings.warn(
            "kernelscope: torch.compile'd code that dynamo stopped compiling at its recompile limit ran eagerly "
            f"while recorded, as it runs a call it has no compiled code for: {_named(codes)}",
            RuntimeWarning,
            stacklevel=5,
        )


def _named(codes: list[types.CodeType]) -> str:
    return ", ".join(f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})" for code in codes[:3]) + (
        f" and {len(codes) - 3} more" if len(codes) > 3 else ""
    )
