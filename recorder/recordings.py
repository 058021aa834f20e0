"""The recording the wrappers record into (``recording_of``), and what a wrapper makes at its first call of one:
its name's sample recorder and scope labels (``sample_scopes``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kernelscope.analyzer.rundir import FUNCTION_PREFIX, SAMPLE_SEPARATOR, call_scope_text

from .compiled import unseen_by_dynamo
from .samples import SampleBook


class Recording:
    """What the wrappers read at their first call of one recording: the sample book of each name (None: the
    name's samples are not collected)."""

    def __init__(self, book: SampleBook, collect: set[str] | None) -> None:
        self.book, self.collect = book, collect
        self.called: list[Callable[[], None]] = []  # the forget() of every wrapper called in this recording

    def sampled(self, name: str) -> SampleBook | None:
        return self.book if self.collect is None or name in self.collect else None

    def forget(self) -> None:
        """Every wrapper called in this recording lets go of its sample recorder (and so of the book)."""
        while self.called:
            self.called.pop()()


current: list[Recording] = []  # the recording whose wrappers are in place (the last one, when nested)


@contextmanager
def recording_of(book: SampleBook, collect: set[str] | None) -> Iterator[Recording]:
    """The wrappers record into ``book`` for the duration of the block, and forget it at its end."""
    recording = Recording(book, collect)
    current.append(recording)
    try:
        yield recording
    finally:
        current.remove(recording)
        recording.forget()


class _Labels(dict):
    """Sample id -> scope name, built on first use: ``ks.fn:<call>#<id>``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def __missing__(self, sample_id: int) -> str:
        label = self[sample_id] = f"{self.prefix}{sample_id}"
        return label


def _unsampled(args: tuple, kwargs: dict) -> int:
    return 0


def sample_scopes(name: str, book: SampleBook | None) -> tuple[Any, dict]:
    """``(record, labels)``: ``labels[record(args, kwargs)]`` is a call's scope name. ``record`` counts the
    call's sample when ``book`` is given; otherwise every call has the plain name ``ks.fn:<call>``."""
    plain = FUNCTION_PREFIX + call_scope_text(name)  # an autograd Function's class may be named in any letters
    if book is None:
        return _unsampled, {0: plain}
    return book.recorder(name), _Labels(plain + SAMPLE_SEPARATOR)


def in_recording(name: str, forget: Callable[[], None]) -> tuple[Any, dict]:
    """A wrapper's ``sample_scopes`` in the recording in progress, which calls ``forget`` at its end. Under
    compiled_code_kept's stance a wrapper may be called inside a compiled frame, where code dynamo never saw is
    refused: this first call's is run with dynamo's frame callback off (compiled.unseen_by_dynamo), as the book's
    keying is (samples.py); a predicted call runs only the recorder's own code, which dynamo is told to run as it is
    (compiled._mark_recorder_code), so the recorded pass pays nothing for it."""
    recording = current[-1]
    recording.called.append(forget)
    return unseen_by_dynamo(sample_scopes, name, recording.sampled(name))
