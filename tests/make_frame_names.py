"""Write analyzer/frame_names.sql: the Python frames of a torch.profiler trace whose call name the rules of
analyzer/frames.sql do not give by themselves, read off the installed torch and the recorder's own lists.

    python tests/make_frame_names.py          # rewrite the file (then review its diff)

tests/test_plain_traces.py checks that the file equals what this script makes, so a torch upgrade that renames,
adds or moves a call shows up as a failing test, never as a silently different name.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

TARGET = Path(__file__).resolve().parent.parent / "analyzer" / "frame_names.sql"
FORMS = {  # where a Python-written call's code lives -> the form of its frames
    "torch/nn/functional.py": "functional",
    "torch/functional.py": "torch",
    "torch/_tensor.py": "Tensor",
}
HEADER = """\
-- frame_names.sql: table ks_frame_names(form, frame, call), the Python frames whose call the rules of frames.sql do
-- not name by themselves, read off torch {version} and the recorder's lists by tests/make_frame_names.py (do not edit:
-- run it; tests/test_plain_traces.py fails when this file differs from what it makes). `frame` is the function a
-- frame names, `form` where it is (frames.sql), `call` the name the recorder gives the call (recorder/calls.py,
-- recorder/instrument.py), or NULL for a frame that is no call of its own:
--   functional: a torch.nn.functional whose code is named otherwise (_threshold is threshold; boolean_dispatch's
--     targets: _max_pool2d is max_pool2d);
--   function: a functional written in C, <built-in function linear>;
--   torch: torch.<name> calls, <built-in method conv2d of type object> (a functional: F.conv2d is torch.conv2d),
--     the targets of torch.functional's boolean_dispatch (_lu_with_infos is torch.lu), and the names the recorder
--     leaves unscoped as launching no kernel (view, transpose…);
--   Tensor: Tensor methods, the operators the recorder scopes (__add__…: a private name otherwise is no call),
--     the same unscoped names, and torch/_tensor.py's operator wrapper (wrapped), whose operator is the frame below;
--   graph: the CUDA graph replay, named as the recorder names its kernels.
CREATE OR REPLACE TEMP TABLE ks_frame_names (form VARCHAR, frame VARCHAR, call VARCHAR);
INSERT INTO ks_frame_names VALUES
"""


def _source(function) -> tuple[str, str]:
    """(torch-relative file, code name) of a function written in Python."""
    code = function.__code__
    path = Path(code.co_filename).as_posix()
    return path[path.rfind("torch/") :], code.co_name


def _dispatch_targets(function) -> list:
    """The functions a torch._jit_internal.boolean_dispatch wrapper chooses between, nested ones unfolded."""
    code = function.__code__
    if code.co_name != "fn" or not function.__closure__:
        return [function]
    cells = dict(zip(code.co_freevars, (cell.cell_contents for cell in function.__closure__), strict=True))
    return [target for key in ("if_true", "if_false") for target in _dispatch_targets(cells[key])]


def frame_names() -> list[tuple[str, str, str | None]]:
    """The rows of ks_frame_names, sorted."""
    import torch
    import torch.nn.functional as F  # noqa: N812
    from kernelscope.analyzer.rundir import GRAPH_REPLAY_CALL
    from kernelscope.recorder.calls import NO_KERNEL_METHODS, OPERATORS, torch_call_targets
    from kernelscope.recorder.instrument import functional_names

    rows: set[tuple[str, str, str | None]] = set()

    def python_rows(function, call: str, namespace) -> None:
        """A Python-written call whose frame names it otherwise: a private target of boolean_dispatch, a function
        bound under another name, or the call inside a decorator's wrapper (the wrapper's frame is no call)."""
        if hasattr(function, "__wrapped__"):
            path, name = _source(function)
            if path in FORMS:
                rows.add((FORMS[path], name, None))
            function = function.__wrapped__
            if not inspect.isfunction(function):  # a C method under a Python wrapper: its frame names it
                return
        for target in _dispatch_targets(function):
            path, name = _source(target)
            if path in FORMS and (name.startswith("_") or not hasattr(namespace, name)):
                rows.add((FORMS[path], name, call))

    for name in functional_names():
        function = getattr(F, name)
        if inspect.isfunction(function):
            python_rows(function, name, F)
        elif repr(function).startswith("<built-in function "):
            rows.add(("function", function.__name__, name))
        else:  # <built-in method conv2d of type object at 0x…>: F.conv2d is torch.conv2d
            rows.add(("torch", function.__name__, name))
    for owner, attribute, call in torch_call_targets():
        function = getattr(owner, attribute)
        if inspect.isfunction(function):
            python_rows(function, call, owner)
        if owner is torch.Tensor and attribute in OPERATORS:
            rows.add(("Tensor", attribute, call))
    for name in NO_KERNEL_METHODS:
        rows.update({("torch", name, None), ("Tensor", name, None)})
    rows.add(("graph", "replay", GRAPH_REPLAY_CALL))
    by_frame: dict[tuple[str, str], set[str | None]] = {}
    for form, frame, call in rows:
        by_frame.setdefault((form, frame), set()).add(call)
    clashes = {key: calls for key, calls in by_frame.items() if len(calls) > 1}
    assert not clashes, f"frames that would name two calls: {clashes}"
    return sorted(rows)


def _literal(value: str | None) -> str:
    return "NULL" if value is None else "'" + value.replace("'", "''") + "'"


def render() -> str:
    import torch

    lines = [f"    ({_literal(form)}, {_literal(frame)}, {_literal(call)})" for form, frame, call in frame_names()]
    return HEADER.format(version=torch.__version__.split("+")[0]) + ",\n".join(lines) + ";\n"


if __name__ == "__main__":
    TARGET.write_text(render(), encoding="utf-8")
    print(f"wrote {TARGET} ({len(frame_names())} rows)", file=sys.stderr)
