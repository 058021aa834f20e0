"""The run directory format, shared by the recorder (writer) and the analyzer (reader). See docs/format.md."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from .errors import BadInputError

# 2: call scopes may carry their module (MODULE_SEPARATOR); 3: no scope around CUDA graph replays, whose
# kernels the analyzer names GRAPH_REPLAY_CALL from their launch (manifest annotation.graph_replay_call), and
# kernels of a compiled region outside any call named COMPILED_REGION_CALL (annotation.compiled_region_call)
FORMAT_VERSION = 3
MANIFEST = "manifest.json"
TRACE = "trace.json.gz"
SAMPLES = "samples.json"
SAMPLE_TENSORS = "samples.pt"

MODULE_PREFIX = "ks.module:"
FUNCTION_PREFIX = "ks.fn:"
SAMPLE_SEPARATOR = "#"
MODULE_SEPARATOR = "@"  # a call scope with its module folded in: ks.fn:linear#3@encoder.fc
GRAPH_REPLAY_CALL = "torch.cuda.CUDAGraph.replay"
COMPILED_REGION_CALL = "torch.compile"
# the call of kernels that no call scope holds, named after an operator without a namespace (docs/sql.md, kernels)
OTHER_OPERATOR_CALL = "(other operator)"
# annotation.name_escape of recordings whose scopes carry module and call names through scope_text()
NAME_ESCAPE = "percent"
_KEPT_IN_SCOPES = frozenset(range(0x20, 0x7F)) - {ord("%"), ord('"'), ord("\\")}
MAX_RANK = (1 << 31) - 1  # ranks and world sizes are 32-bit integers in every table
MAX_NESTING = 100  # JSON levels of a manifest (its tags included): what any engine reads back
NAMING_ANNOTATIONS = (
    "module_prefix", "function_prefix", "sample_separator", "graph_replay_call", "compiled_region_call", "name_escape"
)  # fmt: skip


def scope_text(name: str) -> str:
    """``name`` (a module's or a call's) as a scope's name carries it through Kineto's trace export, which drops the
    events whose names hold a control or non-ASCII character, removes line breaks, makes backslashes slashes and
    writes double quotes unescaped: those bytes of its UTF-8, and ``%``, as ``%XX`` (read back by scope_names.sql's
    ``ks_scope_text``); a lone surrogate, which UTF-8 cannot hold, as its ``\\udcXX`` escape."""
    if name.isascii() and name.isprintable() and "%" not in name and '"' not in name and "\\" not in name:
        return name
    return "".join(chr(b) if b in _KEPT_IN_SCOPES else f"%{b:02X}" for b in name.encode("utf-8", "backslashreplace"))


def names_escaped(manifest: dict | None) -> bool:
    """Whether a recording's scopes carry module and call names through ``scope_text`` (annotation ``name_escape``);
    in older ones and in bare traces a ``%`` is itself."""
    return manifest is not None and manifest.get("annotation", {}).get("name_escape") == NAME_ESCAPE


def read_manifest(run_dir: str | os.PathLike) -> dict:
    """The manifest of a run directory, checked for the fields and version this analyzer understands."""
    path = Path(run_dir) / MANIFEST
    if not path.is_file():
        raise BadInputError(run_dir, f"is not a kernelscope run directory (no {MANIFEST})")
    try:
        manifest = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        raise BadInputError(path, "is not valid JSON") from None
    except OSError as exc:  # permission denied, or an input/output error (a symbolic link to /proc/self/mem)
        raise BadInputError(path, f"cannot be read ({exc.strerror or exc})") from None
    if not isinstance(manifest, dict) or type(manifest.get("format_version")) is not int:
        raise BadInputError(path, "is not a kernelscope manifest (no integer format_version)")
    if manifest["format_version"] > FORMAT_VERSION:
        raise BadInputError(
            path,
            f"has format version {manifest['format_version']}, newer than this kernelscope reads "
            f"({FORMAT_VERSION}); upgrade kernelscope",
        )
    if nested_deeper_than(manifest, MAX_NESTING):
        raise BadInputError(path, f"is nested deeper than {MAX_NESTING} levels")
    for key in ("files", "annotation"):
        if not isinstance(manifest.setdefault(key, {}), dict):
            raise BadInputError(path, f"has a field {key!r} that is not a JSON object")
    _check_fields(path, manifest)
    for key, value in manifest["annotation"].items():
        if key in NAMING_ANNOTATIONS and not (isinstance(value, str) and value):
            raise BadInputError(path, f"has annotation.{key} {value!r}, not a non-empty string")
    for key, default in (("trace", TRACE), ("samples", SAMPLES), ("sample_tensors", None)):
        name = manifest["files"].setdefault(key, default)
        if name is not None and not _is_plain_name(name):
            raise BadInputError(path, f"names files.{key} {name!r}, which is not a file name inside the run directory")
    for key, what in (("trace", "trace"), ("samples", "sample store")):
        if not (Path(run_dir) / manifest["files"][key]).is_file():
            raise BadInputError(run_dir, f"is a run directory missing its {manifest['files'][key]} (the {what})")
    return manifest


def _check_fields(path: Path, manifest: dict) -> None:
    """The fields the analyzer and the archive read, of the JSON type they read them as (bool is not int)."""
    rank, world_size = manifest.get("rank", 0), manifest.get("world_size")
    if not is_rank(rank):
        raise BadInputError(path, f"has rank {json_text(rank)}, not an integer from 0 to {MAX_RANK}")
    if world_size is not None and not (is_rank(world_size) and world_size >= 1):
        raise BadInputError(path, f"has world_size {json_text(world_size)}, not an integer from 1 to {MAX_RANK}")
    if world_size is not None and rank >= world_size:
        raise BadInputError(path, f"has rank {rank}, not below its world_size {world_size}")
    command_line = manifest.get("command_line")
    if command_line is not None and not (
        isinstance(command_line, list) and all(isinstance(word, str) for word in command_line)
    ):
        raise BadInputError(path, f"has command_line {json_text(command_line)}, not a list of strings")
    tags = manifest.get("tags")
    if tags is not None and not isinstance(tags, dict):
        raise BadInputError(path, f"has tags {json_text(tags)}, not a JSON object")


def is_rank(value: object) -> bool:
    """An integer that can be a rank: 0 to MAX_RANK, and not a bool (JSON true is not rank 1)."""
    return type(value) is int and 0 <= value <= MAX_RANK


def nested_deeper_than(value: object, levels: int) -> bool:
    """Whether ``value``'s containers (dicts, lists, tuples) nest more than ``levels`` deep; without recursion, and
    in bounded time for a container that holds itself."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, (list, tuple)) else None
        if children is None:
            continue
        if depth > levels:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


def json_text(value: object, limit: int = 40) -> str:
    """A value as JSON text for a message, cut to ``limit`` characters."""
    text = orjson.dumps(value, default=repr).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_plain_name(name: object) -> bool:
    """A file name of the run directory itself: no directory part, no '..', nothing absolute."""
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name
