"""``kernelscope bench --scripts DIR``: one standalone benchmark per call, for a kernel author to take away.

``DIR/<call>.py`` needs only torch: it loads ``DIR/<call>.samples.pt`` (the call's replayable samples, tensors
laid out as recorded, read with ``torch.load(weights_only=True)``), moves them to the device, and times the call
on each as ``kernelscope bench`` does, from the same code: the sources of layouts.py and timing.py are copied
into it.
"""

from __future__ import annotations

import inspect
import math
import os
import re
from pathlib import Path

import torch
from kernelscope.analyzer.atomic import replace_atomically, write_bytes_atomically
from kernelscope.analyzer.errors import KernelscopeError, OutputExistsError

from . import layouts, timing
from .replay import Callee, SampleInputs

SCRIPT = '''#!/usr/bin/env python3
"""Benchmark of {expression} on the {count} distinct input samples kernelscope recorded ({where}, recorded on
{recorded_on}); each sample is timed as the model called it, with its recorded shapes, dtypes and strides.

Usage: python {script} [--device cuda|cpu] [--repeat N] [--warmup N] [--no-flush-l2]
Needs only torch; the samples are in {samples} beside this file (read with torch.load(weights_only=True)).
Replace FUNCTION below by another implementation of the same signature to time that one.
"""

import argparse
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

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default=None)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--no-flush-l2", action="store_true", help="Do not clear the L2 before each timed call.")
    options = parser.parse_args()
    wanted = options.device or (RECORDED_DEVICE if RECORDED_DEVICE == "cpu" or torch.cuda.is_available() else "cpu")
    device = torch.device("cuda", torch.cuda.current_device()) if wanted == "cuda" else torch.device("cpu")
    replayed_on = "cpu" if wanted == "cpu" else "cuda (" + torch.cuda.get_device_name(device) + ")"
    if replayed_on != RECORDED_ON:
        print("note: recorded on " + RECORDED_ON + ", replayed on " + replayed_on + ": the times do not compare")
    move = device_mapper(RECORDED_DEVICE, device)
    store = torch.load(SAMPLES, weights_only=True, map_location="cpu")
    print("sample  calls  recorded_us  replayed_us  min_us  max_us  signature")
    with torch.no_grad():
        for sample in store["samples"]:
            devices = iter(sample["devices"])
            args, kwargs = map_arguments(
                (sample["args"], sample["kwargs"]), lambda t: exact_copy(t, move(torch.device(next(devices)))), move
            )
            fastest, median, slowest = time_call(
                lambda: FUNCTION(*args, **kwargs), device, options.repeat, options.warmup, not options.no_flush_l2
            )
            print(
                f"{{sample['sample_id']:>6}} {{sample['calls']:>6}} {{sample['recorded_us']:>12.3f}} {{median:>12.3f}} "
                f"{{fastest:>7.3f}} {{slowest:>7.3f}}  {{sample['signature']}}"
            )


if __name__ == "__main__":
    main()
'''


def script_paths(directory: Path, function: str) -> tuple[Path, Path]:
    """``(DIR/<call>.py, DIR/<call>.samples.pt)``, the call's name made a file name."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", function)
    return directory / f"{stem}.py", directory / f"{stem}.samples.pt"


def check_script_destination(directory: Path, functions: list[str], overwrite: bool) -> None:
    """Fail before any work when the scripts have nowhere to go or would replace files without ``overwrite``."""
    if directory.exists() and not directory.is_dir():
        raise KernelscopeError(directory, "is not a directory to write the benchmark scripts into")
    parent = directory if directory.is_dir() else directory.parent
    if not parent.is_dir():
        raise KernelscopeError(parent, "is not an existing directory to write the benchmark scripts into")
    if not os.access(parent, os.W_OK):
        raise KernelscopeError(parent, "is not writable")
    for function in functions:
        for path in script_paths(directory, function):
            if path.exists() and not overwrite:
                raise OutputExistsError(path, "already exists; choose another directory, or replace it with --force")


def write_script(
    directory: Path,
    callee: Callee,
    samples: list[tuple[int, int, str, float, SampleInputs]],
    recorded_type: str,
    recorded_on: str,
    where: str,
) -> Path:
    """Write ``DIR/<call>.py`` and its samples; ``samples``: ``(sample id, calls, signature, recorded µs per
    call, inputs)`` of each replayable sample."""
    directory.mkdir(exist_ok=True)
    script, store = script_paths(directory, callee.name)
    entries = []
    for sample_id, calls, signature, recorded_us, inputs in samples:
        args, kwargs = inputs.make(move_devices=False)  # tensors on the CPU, laid out as recorded
        entries.append({
            "sample_id": sample_id, "calls": calls, "signature": signature,
            "recorded_us": float(recorded_us) if not math.isnan(recorded_us) else float("nan"),
            "args": list(args), "kwargs": kwargs, "devices": inputs.recorded_devices,
        })  # fmt: skip
    replace_atomically(store, lambda tmp: torch.save({"format_version": 1, "samples": entries}, tmp))
    text = SCRIPT.format(
        expression=callee.expression,
        count=len(entries),
        where=where,
        recorded_on=recorded_on,
        recorded_type=recorded_type,
        script=script.name,
        samples=store.name,
        layouts=_source(layouts),
        timing=_source(timing),
    )
    write_bytes_atomically(script, text.encode("utf-8"))
    return script


def _source(module) -> str:
    return inspect.getsource(module).strip() + "\n"
