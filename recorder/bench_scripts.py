"""``kernelscope bench --scripts DIR``: one standalone benchmark per call, for a kernel author to take away.

``DIR/<call>.py`` needs only torch: it loads ``DIR/<call>.samples.pt`` (the call's replayable samples, tensors
laid out as recorded, read with ``torch.load(weights_only=True)``), moves them to the device, and times the call
on each as ``kernelscope bench`` does, from the same code: the sources of layouts.py and timing.py are copied
into it.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import math
import os
import pickle
import re
import shutil
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from kernelscope.analyzer.atomic import (
    errors_naming,
    fsync_dir,
    make_temp_dir,
    publish,
    replace_atomically,
    write_bytes_atomically,
)
from kernelscope.analyzer.errors import KernelscopeError, OutputExistsError

from . import layouts, timing
from .layouts import map_arguments
from .replay import Callee, NotReplayable, SampleInputs, error_reason
from .torch_files import save

SCRIPT = '''#!/usr/bin/env python3
"""Benchmark of {expression} on the {count} distinct input {samples_word} kernelscope recorded ({where}, recorded on
{recorded_on_text}); each sample is timed as the model called it, with its recorded shapes, dtypes and strides.

Usage: python {script} [--device cuda|cpu] [--repeat N] [--warmup N] [--no-flush-l2]
Needs only torch; the samples are in {samples} beside this file (read with torch.load(weights_only=True)).
Replace FUNCTION below by another implementation of the same signature to time that one.
"""

import argparse
import os
import sys
from pathlib import Path

import torch

FUNCTION = {expression}
RECORDED_DEVICE = {recorded_type!r}
RECORDED_ON = {recorded_on!r}
SAMPLES = Path(__file__).with_name({samples!r})

# ---- layouts.py of kernelscope ----
{layouts}
# ---- timing.py of kernelscope ----
{timing}

COLUMNS = (("sample", 6), ("calls", 6), ("recorded_us", 12), ("replayed_us", 12), ("min_us", 12), ("max_us", 12))


def count(least):
    def read(text):
        if not text.isdigit() or int(text) < least:
            raise argparse.ArgumentTypeError(f"{{text}} is not a whole number of {{least}} or more")
        return int(text)

    return read


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default=None)
    parser.add_argument("--repeat", type=count(1), default=50)
    parser.add_argument("--warmup", type=count(0), default=10)
    parser.add_argument("--no-flush-l2", action="store_true", help="Do not clear the L2 before each timed call.")
    options = parser.parse_args()
    wanted = options.device or (RECORDED_DEVICE if RECORDED_DEVICE == "cpu" or torch.cuda.is_available() else "cpu")
    device = torch.device("cuda", torch.cuda.current_device()) if wanted == "cuda" else torch.device("cpu")
    replayed_on = "cpu" if wanted == "cpu" else "cuda (" + torch.cuda.get_device_name(device) + ")"
    if replayed_on != RECORDED_ON:
        print("note: recorded on " + RECORDED_ON + ", replayed on " + replayed_on + ": the times do not compare")
    move = device_mapper(RECORDED_DEVICE, device)
    store = torch.load(SAMPLES, weights_only=True, map_location="cpu")
    print(" ".join(f"{{name:>{{width}}}}" for name, width in COLUMNS) + "  signature")
    with torch.no_grad():
        for sample in store["samples"]:
            devices = iter(sample["devices"])
            args, kwargs = map_arguments(
                (sample["args"], sample["kwargs"]), lambda t: exact_copy(t, move(torch.device(next(devices)))), move
            )
            fastest, median, slowest = time_call(
                lambda: FUNCTION(*args, **kwargs), device, options.repeat, options.warmup, not options.no_flush_l2
            )
            times = (sample["recorded_us"], median, fastest, slowest)
            values = (sample["sample_id"], sample["calls"], *(f"{{us:.3f}}" for us in times))
            row = " ".join(f"{{value:>{{width}}}}" for value, (_, width) in zip(values, COLUMNS))
            print(row + "  " + sample["signature"])


if __name__ == "__main__":
    try:
        main()
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (| head): end as a shell tool does, without a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
'''


def script_stems(functions: list[str]) -> dict[str, str]:
    """The file name (less ``.py``) of each call's script. A name of letters, digits, ``_`` and ``.`` (not first) is
    its own (``linear``, ``Tensor.__add__``); any other, and one that another call's differs from in letter case only
    (which a file system may not tell apart), has its other characters replaced by ``_`` and ``-`` and 8 hex digits
    of the SHA-1 of the name added (``a/b`` -> ``a_b-<8 hex digits>``, never ``a_b``'s). So no two calls share a
    file, and a call's file is named the same in every run (but for a call that its letter case alone sets apart). A
    name longer than _STEM_CHARACTERS is cut there before its digits: its files' names fit a file system's 255 bytes."""
    lowered = Counter(function.lower() for function in set(functions))
    stems = {}
    for function in functions:
        if _PLAIN_NAME.fullmatch(function) and lowered[function.lower()] == 1 and len(function) <= _STEM_CHARACTERS:
            stems[function] = function
        else:
            digest = hashlib.sha1(function.encode("utf-8", "surrogatepass")).hexdigest()[:8]
            stems[function] = f"{_OTHER_CHARACTERS.sub('_', function)[:_STEM_CHARACTERS]}-{digest}"
    return stems


_STEM_CHARACTERS = 128  # with "-<8 hex>.samples.pt" and a temporary file's affixes, well under 255 bytes
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]*")  # not a hidden file's (".x")
_OTHER_CHARACTERS = re.compile(r"^\.|[^A-Za-z0-9_.]")


EXISTS = "already exists; choose another directory, or replace it with --force"


def script_paths(directory: Path, stem: str) -> tuple[Path, Path]:
    """``(DIR/<stem>.py, DIR/<stem>.samples.pt)``: a call's script and its samples (``script_stems``)."""
    return directory / f"{stem}.py", directory / f"{stem}.samples.pt"


def check_script_destination(directory: Path, stems: dict[str, str], overwrite: bool) -> None:
    """Fail before any work when the scripts have nowhere to go or would replace files without ``overwrite``."""
    if (directory.exists() or directory.is_symlink()) and not directory.is_dir():  # a link to nothing: mkdir fails
        raise KernelscopeError(directory, "is not a directory to write the benchmark scripts into")
    parent = directory if directory.is_dir() else directory.parent
    if not parent.is_dir():
        raise KernelscopeError(parent, "is not an existing directory to write the benchmark scripts into")
    if not os.access(parent, os.W_OK):
        raise KernelscopeError(parent, "is not writable")
    for stem in stems.values():
        for path in script_paths(directory, stem):
            if path.exists() and not overwrite:
                raise OutputExistsError(path, EXISTS)


@contextmanager
def staged_scripts(directory: Path, overwrite: bool) -> Iterator[Path]:
    """A new folder to write the scripts into (write_script), inside ``directory`` where it exists (the folder
    check_script_destination found writable), else beside it, whose files are moved into ``directory`` (made where
    missing) once the block ends without an error: a bench that fails on a later call leaves no script of an earlier
    one, nor replaces a file the user had there. The folder is removed either way."""
    parent = directory if directory.is_dir() else directory.parent if str(directory.parent) else Path(".")
    with errors_naming(directory):
        staging = Path(make_temp_dir(parent, f".{directory.name}.", ".partial"))
        try:
            yield staging
            written = sorted(staging.iterdir())
            if written:
                directory.mkdir(exist_ok=True)
            for path in written:
                target = directory / path.name
                if not overwrite and (target.exists() or target.is_symlink()):  # written meanwhile by another
                    raise OutputExistsError(target, EXISTS)
                publish(os.replace, path, target)
            if written:
                fsync_dir(directory)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def write_script(
    directory: Path,
    stem: str,
    callee: Callee,
    samples: list[tuple[int, int, str, float, SampleInputs]],
    recorded_type: str,
    recorded_on: str,
    where: str,
    shown: Path | None = None,
) -> Path | None:
    """Write ``DIR/<stem>.py`` and its samples (``script_stems``); ``samples``: ``(sample id, calls, signature,
    recorded µs per call, inputs)`` of each replayable sample. A sample the script could not replay (its inputs are
    not made, or hold what ``torch.load(weights_only=True)`` does not read) is left out with a RuntimeWarning saying
    why, which names the script in ``shown`` (the folder it goes to from a staging ``directory``, staged_scripts);
    None, and nothing written, when no sample is left."""
    script, store = script_paths(directory, stem)
    entries, left_out = [], []
    for sample_id, calls, signature, recorded_us, inputs in samples:
        try:
            args, kwargs = inputs.make(move_devices=False)  # tensors on the CPU, laid out as recorded
            _check_loadable(args, kwargs)
        except Exception as exc:  # one sample the script cannot hold: say why, keep the others
            left_out.append(f"sample {sample_id} ({error_reason(exc)})")
            continue
        entries.append({
            "sample_id": sample_id, "calls": calls, "signature": signature,
            "recorded_us": float(recorded_us) if not math.isnan(recorded_us) else float("nan"),
            "args": list(args), "kwargs": kwargs, "devices": inputs.recorded_devices,
        })  # fmt: skip
    if left_out:
        them = "them" if len(left_out) > 1 else "it"
        named = script if shown is None else shown / script.name
        fate = f"{named} leaves {them} out" if entries else f"no script of {callee.name} is written"
        warnings.warn(
            f"kernelscope: {callee.name} {', '.join(left_out)} cannot be replayed by a standalone script, so {fate}",
            RuntimeWarning,
            stacklevel=3,
        )
    if not entries:
        return None
    directory.mkdir(exist_ok=True)
    replace_atomically(store, lambda tmp: save({"format_version": 1, "samples": entries}, tmp))
    text = SCRIPT.format(
        expression=callee.expression,
        count=len(entries),
        samples_word="sample" if len(entries) == 1 else "samples",
        where=_docstring_text(where),
        recorded_on_text=_docstring_text(recorded_on),
        recorded_on=recorded_on,
        recorded_type=recorded_type,
        script=script.name,
        samples=store.name,
        layouts=_source(layouts),
        timing=_source(timing),
    )
    write_bytes_atomically(script, text.encode("utf-8"))
    return script


def _docstring_text(text: str) -> str:
    """``text`` escaped for the script's docstring: a run's path or a manifest's device name is the user's data, and
    a quote, backslash, newline or byte that is not UTF-8 in it would end the docstring or the file's encoding."""
    return json.dumps(text)[1:-1]  # every escape JSON writes (a quote, a backslash, a newline, uXXXX) is Python's too


def _check_loadable(args: tuple, kwargs: dict) -> None:
    """Raise unless the script's ``torch.load(weights_only=True)`` reads these arguments back: what torch.save
    cannot pickle (a lock, a module) raises here, and what it pickles as a global that loader refuses (a slice, a
    namedtuple) is named. Tensors are saved as empty ones of their dtype, as their storages always load."""
    shells = map_arguments((args, kwargs), lambda t: torch.empty(0, dtype=t.dtype), lambda value: value)
    buffer = io.BytesIO()
    torch.save(shells, buffer)
    buffer.seek(0)
    unsafe_globals = getattr(torch.serialization, "get_unsafe_globals_in_checkpoint", None)  # torch >= 2.5
    if unsafe_globals is None:
        try:
            torch.load(buffer, weights_only=True)
        except pickle.UnpicklingError:
            raise NotReplayable("holds a value that torch.load(weights_only=True) does not read") from None
    elif refused := unsafe_globals(buffer):
        raise NotReplayable(f"holds {', '.join(refused)}, which torch.load(weights_only=True) does not read")


def _source(module) -> str:
    return inspect.getsource(module).strip() + "\n"
