"""The run directory format, shared by the recorder (writer) and the analyzer (reader). See docs/format.md."""

from __future__ import annotations

import os
import stat
from collections import OrderedDict
from pathlib import Path

import orjson

from .atomic import kind_of
from .errors import BadInputError, json_fault
from .json_text import BOM

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
MANIFEST_BYTES = 16 << 20  # the recorder writes a few KiB: more is not a manifest (a sparse file of terabytes)
# the manifest's fields that the analyzer, the archive, the report and bench read as text: a JSON string or null
TEXT_FIELDS = (
    "kernelscope_version", "torch_version", "cuda_version", "python_version", "platform", "device", "gpu_name",
    "hostname", "backend", "start_time", "git_commit", "model",
)  # fmt: skip
# the manifest's objects of the recording's figures that bench reads (sizes it divides): each a JSON object or null,
# these keys of it a number >= 0 or null, ``reason`` a string or null
FIGURE_FIELDS = {
    "sample_tensors": ("bytes", "limit_bytes"),
    "sample_memory": ("limit_bytes", "kept_bytes", "signatures", "signatures_not_kept"),
}
# the recording's shape: counts, each an integer from its least value (or null), as the recorder writes them
COUNT_FIELDS = {"warmup_iterations": 0, "samples_per_pass": 0}
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


def call_scope_text(name: str) -> str:
    """``scope_text`` of a call's name, its ``@`` escaped too (``%40``): in ``ks.fn:<call>#<id>@<module>`` the first
    one ends the call (a Tensor attribute or an autograd Function's class may be named in any letters)."""
    text = scope_text(name)
    return text.replace("@", "%40") if "@" in text else text


def names_escaped(manifest: dict | None) -> bool:
    """Whether a recording's scopes carry module and call names through ``scope_text`` (annotation ``name_escape``);
    in older ones and in bare traces a ``%`` is itself."""
    return manifest is not None and manifest.get("annotation", {}).get("name_escape") == NAME_ESCAPE


def read_manifest(run_dir: str | os.PathLike) -> dict:
    """The manifest of a run directory, checked for the fields and version this analyzer understands."""
    path = held_file(run_dir, MANIFEST, f"is not a kernelscope run directory (no {MANIFEST})")
    try:
        data = read_at_most(path, MANIFEST_BYTES, "a manifest")
    except OSError as exc:  # permission denied, or an input/output error (a symbolic link to /proc/self/mem)
        raise BadInputError(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        manifest = orjson.loads(data.removeprefix(BOM))  # an editor's byte order mark, as in a trace
    except orjson.JSONDecodeError as exc:
        raise BadInputError(path, f"is not valid JSON ({json_fault(data, exc)})") from None
    check_manifest(path, manifest)
    for key, what in (("trace", "trace"), ("samples", "sample store")):
        name = manifest["files"][key]
        held_file(run_dir, name, f"is a run directory missing its {name} (the {what})")
    return manifest


def held_file(run_dir: str | os.PathLike, name: str, missing: str) -> Path:
    """``run_dir/name``, checked to be a regular file (through links): bad input of the run directory, ``missing``,
    where there is none; of the file, saying what it is, where it is a directory, FIFO, device or dangling link."""
    path = Path(run_dir) / name
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise BadInputError(path, "is a symbolic link to a file that does not exist") from None
        raise BadInputError(run_dir, missing) from None
    except OSError as exc:  # a link that loops, a folder that cannot be searched
        raise BadInputError(path, f"cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        raise BadInputError(path, f"is {kind_of(mode)}, not a regular file")
    return path


def read_at_most(path: Path, limit: int, what: str) -> bytes:
    """The bytes of ``path``, refused as bad input past ``limit`` (read in chunks: a file that grows while it is read,
    or a sparse one of terabytes, takes no more memory than that)."""
    chunks, size = [], 0
    with open(path, "rb") as stream:
        while chunk := stream.read(min(16 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise BadInputError(path, f"holds more than the {limit:,} bytes {what} may take here")
    return b"".join(chunks)


def torchscript_paths(manifest: dict | None) -> list[tuple[str, str, str]]:
    """(TorchScript module, path inside it, module) for each module path a recording of TorchScript modules maps
    (annotation ``torchscript_modules``, checked by check_manifest; docs/format.md); none elsewhere."""
    paths = {} if manifest is None else manifest.get("annotation", {}).get("torchscript_modules", {})
    return [(scope, path, module) for scope, modules in paths.items() for path, module in modules.items()]


def _is_path_map(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(modules, dict) and all(isinstance(m, str) for m in (*modules, *modules.values()))
        for modules in value.values()
    )


def check_manifest(path: str | os.PathLike, manifest: object) -> None:
    """A parsed manifest (of a run directory at ``path``, or archived there), checked for the fields and version this
    analyzer understands; ``files`` and ``annotation`` are set to ``{}`` where missing, ``files``' names to their
    defaults."""
    if not isinstance(manifest, dict) or type(manifest.get("format_version")) is not int:
        raise BadInputError(path, "is not a kernelscope manifest (no integer format_version)")
    if manifest["format_version"] < 1:  # versions count from 1: no kernelscope writes 0 or less
        raise BadInputError(path, f"has format version {manifest['format_version']}, which no kernelscope writes")
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
    if not _is_path_map(manifest["annotation"].get("torchscript_modules", {})):
        raise BadInputError(path, "has annotation.torchscript_modules that is not an object of objects of strings")
    for key, default in (("trace", TRACE), ("samples", SAMPLES), ("sample_tensors", None)):
        name = manifest["files"].setdefault(key, default)
        if (name is not None or default is not None) and not _is_plain_name(name):  # samples.pt alone may be none
            shown = repr(name) if isinstance(name, str) else json_text(name)
            raise BadInputError(path, f"names files.{key} {shown}, which is not a file name inside the run directory")


def _check_fields(path: str | os.PathLike, manifest: dict) -> None:
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
    for key, least in COUNT_FIELDS.items():
        count = manifest.get(key)
        if count is not None and not (type(count) is int and least <= count <= MAX_RANK):
            raise BadInputError(path, f"has {key} {json_text(count)}, not an integer from {least} to {MAX_RANK}")
    tags = manifest.get("tags")
    if tags is not None and not isinstance(tags, dict):
        raise BadInputError(path, f"has tags {json_text(tags)}, not a JSON object")
    for key in TEXT_FIELDS:
        if not isinstance(manifest.get(key, ""), (str, type(None))):
            raise BadInputError(path, f"has {key} {json_text(manifest[key])}, not a string")
    for key, numbers in FIGURE_FIELDS.items():
        figures = manifest.get(key)
        if figures is None:
            continue
        if not isinstance(figures, dict):
            raise BadInputError(path, f"has {key} {json_text(figures)}, not a JSON object")
        for name in numbers:
            if not _is_size(figures.get(name, 0)):
                raise BadInputError(path, f"has {key}.{name} {json_text(figures[name])}, not a number >= 0")
        if not isinstance(figures.get("reason", ""), (str, type(None))):
            raise BadInputError(path, f"has {key}.reason {json_text(figures['reason'])}, not a string")


def _is_size(value: object) -> bool:
    """null, or a finite number >= 0 (not a bool: JSON true is no size)."""
    return value is None or (type(value) in (int, float) and 0 <= value < float("inf"))


def is_rank(value: object) -> bool:
    """An integer that can be a rank: 0 to MAX_RANK, and not a bool (JSON true is not rank 1)."""
    return type(value) is int and 0 <= value <= MAX_RANK


def container_items(value: object) -> list | None:
    """The items of a tuple or list, or the ``(key, value)`` pairs of a dict, of a subclass too, read from the
    container itself, as torch's argument parser reads a list or tuple: never through a method of a subclass's own.
    Such a method may raise, never end or return no iterable, and torch takes the argument all the same, so a
    recording must read it without them. None for any other value."""
    kind = type(value)  # by type: isinstance also runs a __class__ property of the object's own
    if issubclass(kind, tuple):
        return list(tuple.__iter__(value))
    if issubclass(kind, list):
        return list(list.__iter__(value))
    if issubclass(kind, dict):
        return list((OrderedDict if issubclass(kind, OrderedDict) else dict).items(value))
    return None


def nested_deeper_than(value: object, levels: int) -> bool:
    """Whether ``value``'s containers (dicts, lists, tuples) nest more than ``levels`` deep; without recursion, and
    in bounded time for a container that holds itself."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = container_items(item)
        if children is None:
            continue
        if issubclass(type(item), dict):
            children = [child for _key, child in children]
        if depth > levels:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


def values_more_than(value: object, limit: int) -> bool:
    """Whether ``value``'s containers hold more than ``limit`` values walked as a tree, a container met twice counted
    twice: a pickle refers to what it wrote before, so a few hundred bytes can hold a list 2^48 times, which any walk
    (nested_deeper_than's) would take for ever over."""
    pending, walked = [value], 0
    while pending:
        item = pending.pop()
        children = container_items(item)
        if children is None:
            continue
        if issubclass(type(item), dict):
            children = [child for _key, child in children]
        walked += len(children)
        if walked > limit:
            return True
        pending.extend(children)
    return False


def json_text(value: object, limit: int = 40) -> str:
    """A value as JSON text for a message, cut to ``limit`` characters."""
    text = orjson.dumps(value, default=repr).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_plain_name(name: object) -> bool:
    """A file name of the run directory itself: no directory part, no '..', nothing absolute, no NUL (which no file
    name holds: the system call would refuse the path)."""
    return isinstance(name, str) and name not in ("", ".", "..") and not any(c in name for c in "/\\\0")
