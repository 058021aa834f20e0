"""Typed errors: every expected failure names the file and says what is wrong in one sentence."""

from __future__ import annotations

import os


class KernelscopeError(Exception):
    """An expected failure the CLI reports as one line and a non-zero exit, without a traceback."""

    exit_code = 2

    def __init__(self, path: str | os.PathLike | None, problem: str):
        self.path = None if path is None else os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


class BadInputError(KernelscopeError):
    """A trace, run directory or sample store that cannot be read as what it claims to be."""


class RunExistsError(KernelscopeError):
    """The destination of a run already exists and overwriting was not asked for."""


class OutputExistsError(KernelscopeError):
    """An output file (export, database) already exists and --force was not given."""


class RecordingBusyError(KernelscopeError, RuntimeError):
    """profile() was called while a recording runs in this process (re-entered, or from another thread)."""


class BadSamplesError(KernelscopeError, ValueError):
    """profile() was given samples that are not a sequence of (args, kwargs) pairs."""
