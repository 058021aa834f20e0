"""The frames dynamo compiled in this process and their entries, to tell whether a recording compiled anything
(benchmarks/gpu_check.py)."""

from __future__ import annotations

import gc
from pathlib import Path

from kernelscope.recorder.compiled import compiled_entries


def entry_identities(collect_first: bool = False) -> dict:
    """Every compiled frame's entries, as the identities of their compiled code: equal before and after a recording
    that compiled nothing. ``collect_first``: the models of earlier workloads are collected first (dynamo invalidates
    the entries that guard a dead object)."""
    if collect_first:
        gc.collect()
    return {
        id(code): (f"{code.co_name} ({Path(code.co_filename).name}:{code.co_firstlineno})", entries)
        for code, entries in (
            (code, sorted(id(entry.code) for entry in entries)) for code, entries in compiled_entries().items()
        )
    }


def changed_entries(before: dict, after: dict) -> list[str]:
    """The frames a recording compiled or compiled again: new in ``after``, or with other entries. A frame gone
    from ``after`` is an earlier workload's, collected meanwhile (its code object died with it): no change."""
    return [
        f"{name}: {'new' if key not in before else 'entries changed'}"
        for key, (name, entries) in after.items()
        if key not in before or before[key] != (name, entries)
    ]
