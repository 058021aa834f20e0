"""What ``kernelscope record TARGET`` records: ``pkg.module:factory`` (imported as ``python -m`` would, with
the current directory on the import path) or ``path/to/file.py:factory``, whose factory returns
``(module, samples)`` or ``(fn, module)``."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from kernelscope.analyzer.errors import BadSamplesError, KernelscopeError, type_with_article


def resolve_factory(target: str) -> Callable:
    """The factory ``target`` names; a target that names nothing importable is one KernelscopeError. Errors
    raised by the user's own module while it imports propagate (``record`` prints their frames: user_code.py)."""
    where, _, attribute = target.rpartition(":")
    if not where or not attribute:
        raise KernelscopeError(target, "is not a target: expected 'pkg.module:factory' or 'path/to/file.py:factory'")
    if not where.endswith(".py") and not all(part.isidentifier() for part in where.split(".")):
        raise KernelscopeError(target, _not_a_module_name(where, attribute))
    module = _import_file(target, Path(where)) if where.endswith(".py") else _import_module(target, where)
    factory = getattr(module, attribute, None)
    if factory is None:
        raise KernelscopeError(target, f"{where} has no attribute {attribute!r}{_shadowed(module, where, attribute)}")
    if not callable(factory):
        raise KernelscopeError(target, f"{where}.{attribute} is {type_with_article(factory)}, not a factory to call")
    return factory


def _not_a_module_name(where: str, attribute: str) -> str:
    """What to give for ``where`` that importlib cannot take (``../models/mine``: a relative import's TypeError)."""
    if Path(f"{where}.py").is_file():
        return f"{where!r} is a path: name its file, {where}.py:{attribute}"
    return f"{where!r} is not a module name (pkg.module) nor a .py file: give 'pkg.module:factory' or 'file.py:factory'"


def _shadowed(module, name: str, attribute: str) -> str:
    """Where ``name`` imported another module than the user's file of that name here (``types.py``: Python's own
    ``types``, imported before the command ran, wins): what to give instead."""
    mine = Path.cwd().joinpath(*name.split(".")).with_suffix(".py")
    found = getattr(module, "__file__", None) or "a built-in module"
    if not mine.is_file() or Path(found).resolve() == mine.resolve():
        return ""
    here = mine.relative_to(Path.cwd())
    return f" (that {name} is {found}, which shadows ./{here}: name the file instead, {here}:{attribute})"


def _import_module(target: str, name: str):
    cwd = str(Path.cwd())
    if cwd not in sys.path:  # as `python -m` does, for the whole command: the factory may import more later
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise KernelscopeError(
                target,
                f"no module named {exc.name!r} here ({cwd}) or on the import path; run from the folder that holds "
                "it, or name its file: path/to/file.py:factory",
            ) from None
        raise


def _import_file(target: str, path: Path):
    if not path.is_file():
        raise KernelscopeError(target, f"{path} is not a file")
    folder = str(path.resolve().parent)
    if folder not in sys.path:  # as `python path/to/file.py` does: its siblings import
        sys.path.insert(0, folder)
    name = path.stem if path.stem not in sys.modules else f"_kernelscope_target_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def made_by(target: str, made) -> tuple:
    """``(fn, data, module)`` for profile() from what the factory returned."""
    from kernelscope.recorder.sample_form import check_samples
    from torch import nn

    if not (isinstance(made, tuple) and len(made) == 2):
        raise KernelscopeError(target, f"returned {type_with_article(made)}, not (module, samples) or (fn, module)")
    first, second = made
    if isinstance(second, nn.Module):
        if not callable(first):  # (samples, module): the samples would be called as fn()
            problem = f"returned ({type(first).__name__}, module): the module comes first, as (module, samples)"
            raise KernelscopeError(target, problem)
        return first, None, second
    if not isinstance(first, nn.Module):
        raise KernelscopeError(target, "returned neither (module, samples) nor (fn, module): no nn.Module in it")
    if callable(second):
        raise KernelscopeError(
            target, f"returned (module, {type(second).__name__}): a function comes first, as (fn, module)"
        )
    samples = list(second) if isinstance(second, Iterator) else second  # a generator's samples, as a list
    try:
        check_samples(samples)
    except BadSamplesError as exc:
        raise KernelscopeError(target, exc.problem) from None  # the target named, which profile() cannot
    if not samples:  # an exhausted data loader: the run would hold nothing, and analyze refuses such a run
        raise KernelscopeError(
            target,
            "returned no samples (an empty list): the model would not run once; return at least one (args, "
            "kwargs) pair",
        )
    return first, list(samples), None
