"""cpu_sweep.py's ``--first-call`` checks: profile() as a model's very first call, which the ordinary checks cannot
see (their unprofiled reference passes run before profile(), so lazy imports, caches a model fills on its first call
and compilations it makes then have already happened unrecorded).

For each warm-up count (0, then 1), a model is built from the program's factory under a fixed seed and:

  1. profile() is its first call and does not raise;
  2. no wrapper of the recorder's is left in, and no attribute removed from, any ``__dict__`` cpu_sweep snapshots
     (torch's own first-use changes, such as dynamo's patches of nn.Module, left aside);
  3. every pass profile() ran (warm-ups and the recorded pass) gives outputs bit-identical to the same passes of a
     fresh copy built from the same factory and seed afterwards, never profiled, under the same RNG seeds;
  4. one more unprofiled pass of the profiled model works and equals the fresh copy's next pass.

A program whose two fresh copies already differ (its outputs depend on something besides seed and call order) is
reported as not comparable, never as passed.
"""

from __future__ import annotations

import traceback
from pathlib import Path

import torch
from cpu_sweep import bit_identical
from gpu_check import flatten
from kernelscope.recorder import ModuleFunctionKernelProfiler
from kernelscope.recorder.profiler import _run_pass
from sweep_patches import changes, snapshot

BUILD_SEED, PROFILE_SEED, AFTER_SEED = 0, 1234, 4321  # the same seeds for the profiled model and its fresh copies


def capturing(fn, into: list):
    """``fn``, keeping copies of its outputs; a DTensor's local shard, which compares after the program's cleanup
    has destroyed its process group."""

    def call(*args, **kwargs):
        out = fn(*args, **kwargs)
        tensors = [t.to_local() if hasattr(t, "to_local") else t for t in flatten(out)]
        into.append([t.detach().clone() for t in tensors])
        return out

    return call


def _passes(fn, samples, count: int) -> list:
    """The outputs of ``count`` unprofiled passes, the first under PROFILE_SEED (as profile() runs them)."""
    out: list = []
    torch.manual_seed(PROFILE_SEED)
    with torch.no_grad():
        for _ in range(count):
            _run_pass(capturing(fn, out), samples)
    return out


def _after(fn, samples) -> list:
    """The outputs of the pass after profile()'s (or the fresh copy's) passes, under AFTER_SEED."""
    out: list = []
    torch.manual_seed(AFTER_SEED)
    with torch.no_grad():
        _run_pass(capturing(fn, out), samples)
    return out


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(bit_identical(s, t) for s, t in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )


class Unprofiled(Exception):
    """The program cannot be built here."""


class FreshFails(Exception):
    """A fresh copy, built after profile(), fails unprofiled: the program's own failure (cpu_sweep's ordinary run
    skips it) or a process profile() left broken (its tables of torch functions, say), never a pass."""


def _build(factory):
    torch.manual_seed(BUILD_SEED)
    try:
        return factory()
    except Exception as exc:
        raise Unprofiled(f"cannot build: {type(exc).__name__}: {str(exc)[:200]}") from exc


def _fresh(factory, passes: int) -> tuple[list, list]:
    """A fresh copy's outputs for ``passes`` passes and the one after; its notes' cleanup run."""
    w = _build(factory)
    try:
        return _passes(w.fn, w.samples, passes), _after(w.fn, w.samples)
    except Exception as exc:
        raise FreshFails(f"a fresh copy fails unprofiled: {type(exc).__name__}: {str(exc)[:200]}") from exc
    finally:
        w.notes.get("cleanup", lambda: None)()


def first_call(factory, warmup: int, run_dir: Path) -> dict:
    """profile() as the first call of a model from ``factory`` with ``warmup`` warm-ups, and what it breaks."""
    result: dict = {"warmup": warmup}
    w = _build(factory)
    captured: list = []
    try:
        before = snapshot(w)
        torch.manual_seed(PROFILE_SEED)
        try:
            ModuleFunctionKernelProfiler().profile(capturing(w.fn, captured), w.samples, module=w.module,
                                                   warmup_iterations=warmup, out=run_dir, overwrite=True)  # fmt: skip
        except BaseException as exc:  # noqa: BLE001 - profile() raising on a first call: the finding
            result["error"] = f"{type(exc).__name__}: {exc}"[:400]
            result["traceback"] = traceback.format_exc()[-2000:]
        result["patches_left"] = changes(before, recorder_only=True)
        try:
            after = _after(w.fn, w.samples)
        except Exception as exc:  # the model broken for its user after profile()
            result["after_error"] = f"{type(exc).__name__}: {exc}"[:400]
            after = []
    finally:
        w.notes.get("cleanup", lambda: None)()
    per_pass = len(w.samples) if w.samples is not None else 1
    passes = max(-(-len(captured) // max(per_pass, 1)), warmup + 1)  # profile() may record a pass again
    reference, reference_after = _fresh(factory, passes)
    result["profiled_passes_match"] = same(captured, reference)
    if not result["profiled_passes_match"]:
        pairs = enumerate(zip(captured, reference, strict=False))
        differing = [i for i, (a, b) in pairs if not same([a], [b])][:8]
        result["calls"] = {"profiled": len(captured), "fresh": len(reference), "differing": differing}
    result["after_matches"] = same(after, reference_after)
    if not (result["profiled_passes_match"] and result["after_matches"]):
        again, again_after = _fresh(factory, passes)  # a second fresh copy: is the program deterministic at all?
        if not (same(again, reference) and same(again_after, reference_after)):
            result["not_comparable"] = "two fresh copies differ"
    result["ok"] = bool(
        "error" not in result and "after_error" not in result and not result["patches_left"]
        and result["profiled_passes_match"] and result["after_matches"]
    )  # fmt: skip
    return result


def _only_mismatches(one: dict) -> bool:
    return "error" not in one and "after_error" not in one and not one["patches_left"]


def check_first_call(name: str, factory, out_root: Path) -> dict:
    """cpu_sweep's result for one program in ``--first-call`` mode: 0 warm-ups, then 1, each on a fresh model."""
    result: dict = {"workload": name, "first_calls": []}
    for warmup in (0, 1):
        try:
            one = first_call(factory, warmup, out_root / f"{name}_w{warmup}")
        except Unprofiled as exc:  # a model its library cannot build here: not a result
            result["skipped"] = str(exc)
            return result
        except FreshFails as exc:
            one = {"warmup": warmup, "ok": False, "fresh_error": str(exc)}
        except BaseException as exc:  # noqa: BLE001 - a failure of kernelscope on this model: the finding
            one = {"warmup": warmup, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:400],
                   "traceback": traceback.format_exc()[-2000:]}  # fmt: skip
        result["first_calls"].append(one)
    mismatches_only = all(one["ok"] or ("not_comparable" in one and _only_mismatches(one))
                          for one in result["first_calls"])  # fmt: skip
    if mismatches_only and not all(one["ok"] for one in result["first_calls"]):
        result["skipped"] = "not comparable: two fresh copies differ"
    result["ok"] = all(one["ok"] for one in result["first_calls"])
    return result
