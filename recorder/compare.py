"""Whether an alternative implementation computed what the original did: ``torch.testing.assert_close`` on every
tensor of the two results, with tolerances by dtype, and the largest absolute and relative error.

The tolerances let a kernel accumulate in another order (a few units in the last place of the dtype) and
catch a wrong result (a missing bias, a transposed operand), whose errors are of the size of the values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from kernelscope.analyzer.errors import type_with_article

# (rtol, atol) per dtype; integers and booleans must be equal. TF32 matmuls and convolutions (torch's default
# for cuDNN convolutions) keep about 1e-3 of a float32.
TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.complex128: (1e-7, 1e-7),
    torch.float32: (1e-3, 1e-3),
    torch.complex64: (1e-3, 1e-3),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}
_EIGHT_BIT_FLOATS = (5e-1, 5e-1)


@dataclass(frozen=True)
class Comparison:
    """The verdict on one sample: ``match``, the largest errors over its tensors (NaN without any), and why
    it does not match."""

    match: bool
    max_abs_err: float
    max_rel_err: float
    reason: str | None = None


def tolerances(dtype: torch.dtype, rtol: float | None = None, atol: float | None = None) -> tuple[float, float]:
    """(rtol, atol) for ``dtype``: the table's, each replaced by the one given."""
    if dtype.is_floating_point or dtype.is_complex:
        default = TOLERANCES.get(dtype, _EIGHT_BIT_FLOATS)
    else:
        default = (0.0, 0.0)
    return (default[0] if rtol is None else rtol, default[1] if atol is None else atol)


def compare(actual: Any, expected: Any, rtol: float | None = None, atol: float | None = None) -> Comparison:
    """``actual`` (the alternative's result) against ``expected`` (the original's), at any depth of tuples,
    lists and dicts; the two must have the same structure and non-tensor values."""
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
    problem = _pair_up(actual, expected, "result", pairs)
    abs_err = rel_err = math.nan
    for got, want in pairs:
        if got.shape != want.shape or got.dtype != want.dtype:
            continue  # assert_close below says how they differ
        if got.numel():
            errors = _errors(got, want)
            abs_err = errors[0] if math.isnan(abs_err) else max(abs_err, errors[0])
            rel_err = errors[1] if math.isnan(rel_err) else max(rel_err, errors[1])
    if problem is None:
        for position, (got, want) in enumerate(pairs):
            rt, at = tolerances(want.dtype, rtol, atol)
            try:
                torch.testing.assert_close(got, want, rtol=rt, atol=at, equal_nan=True, check_device=False)
            except AssertionError as exc:
                problem = f"tensor {position} of the result: {_gist(exc)} (rtol {rt:g}, atol {at:g})"
                break
    return Comparison(problem is None, abs_err, rel_err, problem)


def _pair_up(actual: Any, expected: Any, where: str, pairs: list) -> str | None:
    if isinstance(expected, torch.Tensor) or isinstance(actual, torch.Tensor):
        if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)):
            return f"{where} is {type_with_article(actual)}, the original's {type_with_article(expected)}"
        pairs.append((actual, expected))
        return None
    if isinstance(expected, (tuple, list)) and isinstance(actual, (tuple, list)):
        if len(actual) != len(expected):
            return f"{where} has {len(actual)} items, the original's {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            problem = _pair_up(a, e, f"{where}[{i}]", pairs)
            if problem:
                return problem
        return None
    if isinstance(expected, dict) and isinstance(actual, dict):
        if actual.keys() != expected.keys():
            return f"{where} has keys {sorted(map(str, actual))}, the original's {sorted(map(str, expected))}"
        for key in expected:
            problem = _pair_up(actual[key], expected[key], f"{where}[{key!r}]", pairs)
            if problem:
                return problem
        return None
    if type(actual) is not type(expected) or not _same_value(actual, expected):
        return f"{where} is {actual!r}, the original's {expected!r}"
    return None


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-6)
    try:
        return bool(a == b)
    except Exception:  # an object without a usable ==: the same object only
        return a is b


def _errors(got: torch.Tensor, want: torch.Tensor) -> tuple[float, float]:
    """The largest |got - want| and |got - want| / |want| (over elements where want is not 0), NaN-free."""
    wide = torch.complex128 if got.dtype.is_complex or want.dtype.is_complex else torch.float64
    got, want = got.detach().to("cpu", wide), want.detach().to("cpu", wide)
    diff = (got - want).abs().masked_fill((got == want) | (torch.isnan(got) & torch.isnan(want)), 0.0)
    diff = torch.nan_to_num(diff, nan=math.inf)
    scale = want.abs()
    relative = torch.where(scale > 0, diff / scale, torch.where(diff > 0, math.inf, 0.0))
    return float(diff.max()), float(relative.max())


def _gist(exc: AssertionError) -> str:
    """assert_close's count of mismatched elements, else its first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    counted = [line for line in lines if line.startswith("Mismatched elements")]
    return (counted or lines or [type(exc).__name__])[0].rstrip(".")
