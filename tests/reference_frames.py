"""The reference attribution's reading of a plain trace's Python frames (torch.profiler's with_stack=True), written
apart from analyzer/frames.sql: which frame is a module, which a call and under what name. reference.py places
them on its per-thread stacks like any other scope. The exceptions to the naming rules are data, read here from
analyzer/frame_names.sql (tests/test_plain_traces.py checks that file against torch).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

FRAME_NAMES_SQL = Path(__file__).resolve().parent.parent / "analyzer" / "frame_names.sql"
MODULE_FRAME = "nn.Module: "
# the forms of frame_names.sql: the file of a call written in Python, the owner of a method written in C
PYTHON_FILES = {"nn/functional": "functional", "functional": "torch", "_tensor": "Tensor", "cuda/graphs": "graph"}
PYTHON_FRAME = re.compile(
    r"(?:.*[/\\])?torch[/\\](nn[/\\]functional|functional|_tensor|cuda[/\\]graphs)\.py\(\d+\): (\w+)"
)
BUILTIN_FUNCTION = re.compile(r"<built-in function (\w+)>")
BUILTIN_METHOD = re.compile(r"<built-in method (\w+) of (.*) object at .*>")
TENSOR_BASE_METHOD = re.compile(r"<method '(\w+)' of 'torch\._C\._?TensorBase' objects>")
NAMESPACES = {"functional": "", "torch": "torch.", "Tensor": "Tensor."}
SUBMODULES = ("linalg", "fft", "special")  # <built-in function linalg_vector_norm> is torch.linalg.vector_norm


@cache
def frame_names() -> dict[tuple[str, str], str | None]:
    text = FRAME_NAMES_SQL.read_text(encoding="utf-8")
    rows = re.findall(r"\('(\w+)', '(\w+)', (NULL|'[\w.]+')\)", text)
    return {(form, frame): None if call == "NULL" else call.strip("'") for form, frame, call in rows}


def _form_and_function(name: str) -> tuple[str, str] | None:
    if match := PYTHON_FRAME.fullmatch(name):
        return PYTHON_FILES[match.group(1).replace("\\", "/")], match.group(2)
    if match := BUILTIN_FUNCTION.fullmatch(name):
        return "function", match.group(1)
    if match := TENSOR_BASE_METHOD.fullmatch(name):
        return "Tensor", match.group(1)
    if match := BUILTIN_METHOD.fullmatch(name):
        owner = match.group(2)
        if owner == "type":
            return "torch", match.group(1)
        if owner == "CUDAGraph":
            return "graph", match.group(1)
        if owner == "Parameter" or owner.endswith("Tensor"):
            return "Tensor", match.group(1)
    return None


@cache
def frame_scope(name: str) -> tuple[str, str] | None:
    """What a python_function frame is: ("module", its label), ("functional", call), ("torch", call) for a torch-level
    call (a dotted name), or None."""
    if name.startswith(MODULE_FRAME):
        return "module", name[len(MODULE_FRAME) :]
    found = _form_and_function(name)
    if found is None:
        return None
    form, function = found
    if (form, function) in frame_names():
        call = frame_names()[(form, function)]
    elif function.startswith("_"):
        call = None
    elif form in NAMESPACES:
        call = NAMESPACES[form] + function
    elif form == "function":
        subs = [sub for sub in SUBMODULES if function.startswith(sub + "_")]
        call = f"torch.{subs[0]}.{function[len(subs[0]) + 1 :]}" if subs else None
    else:
        call = None
    if call is None:
        return None
    return ("torch" if "." in call else "functional"), call
