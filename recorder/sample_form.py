"""The form profile() takes samples in, checked before anything runs: a sequence of ``(args, kwargs)`` pairs,
one per call, ``args`` a tuple or list and ``kwargs`` a dict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kernelscope.analyzer.errors import BadSamplesError, type_with_article

FORM = "samples are a list of (args, kwargs) pairs, one per call: [((x,), {})] calls the model as model(x)"


def check_samples(data: Any) -> None:
    """Raise BadSamplesError, in one sentence that shows the form, unless ``data`` has it."""
    if isinstance(data, (str, bytes, Mapping)) or not isinstance(data, Sequence):
        raise BadSamplesError(None, f"the samples are {_what(data)}; {FORM}")
    if _one_pair(data):  # ((x,), {}) for [((x,), {})]: its args would read as samples[0], its kwargs as samples[1]
        raise BadSamplesError(
            None, f"the samples are one (args, kwargs) pair, not a list of them: put it in a list; {FORM}"
        )
    for position, sample in enumerate(data):
        if not isinstance(sample, (tuple, list)) or len(sample) != 2:
            raise BadSamplesError(None, f"samples[{position}] is {_what(sample)}, not an (args, kwargs) pair; {FORM}")
        args, kwargs = sample
        if not isinstance(args, (tuple, list)) or not isinstance(kwargs, Mapping):
            raise BadSamplesError(
                None,
                f"samples[{position}] is ({_what(args)}, {_what(kwargs)}), not (args, kwargs) with args a tuple and "
                f"kwargs a dict; {FORM}",
            )


def _one_pair(data: Sequence) -> bool:
    if len(data) != 2 or not isinstance(data[0], (tuple, list)) or not isinstance(data[1], Mapping):
        return False
    return not (len(data[0]) == 2 and isinstance(data[0][1], Mapping))  # [(args, kwargs), {}]: a pair, then a dict


def _what(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"{type_with_article(value)} of {len(value)} item{'' if len(value) == 1 else 's'}"
    return type_with_article(value)
