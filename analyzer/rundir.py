"""The run directory format, shared by the recorder (writer) and the analyzer (reader). See docs/format.md."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from .errors import BadInputError

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
TRACE = "trace.json.gz"
SAMPLES = "samples.json"
SAMPLE_TENSORS = "samples.pt"

MODULE_PREFIX = "ks.module:"
FUNCTION_PREFIX = "ks.fn:"
SAMPLE_SEPARATOR = "#"


def read_manifest(run_dir: str | os.PathLike) -> dict:
    """The manifest of a run directory, checked for the fields and version this analyzer understands."""
    path = Path(run_dir) / MANIFEST
    if not path.is_file():
        raise BadInputError(run_dir, f"is not a kernelscope run directory (no {MANIFEST})")
    try:
        manifest = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        raise BadInputError(path, "is not valid JSON") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("format_version"), int):
        raise BadInputError(path, "is not a kernelscope manifest (no integer format_version)")
    if manifest["format_version"] > FORMAT_VERSION:
        raise BadInputError(
            path,
            f"has format version {manifest['format_version']}, newer than this kernelscope reads "
            f"({FORMAT_VERSION}); upgrade kernelscope",
        )
    for name in (TRACE, SAMPLES):
        if not (Path(run_dir) / name).is_file():
            raise BadInputError(run_dir, f"is a run directory missing its {name}")
    return manifest
