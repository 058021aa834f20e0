"""Replaying a recorded call: the callable its name stands for, and fresh inputs of one of its samples laid out
as recorded (layouts.py).

How a call name is resolved (the one rule; names are made in recorder/calls.py and recorder/instrument.py):

- ``<name>`` without a dot is ``torch.nn.functional.<name>`` (``linear``, ``scaled_dot_product_attention``);
- ``Tensor.<method>`` is ``torch.Tensor.<method>``, called with the tensor first, as the recorder stored it
  (``Tensor.__add__(x, y)`` is ``x + y``, ``Tensor.mean(x, dim=0)`` is ``x.mean(dim=0)``);
- ``torch.<path>`` is that attribute of ``torch`` (``torch.addmm``, ``torch.linalg.vector_norm``);
- anything else cannot be replayed: ``triton.<kernel>`` and ``<Function>.apply`` ran a Triton kernel or an
  autograd Function of the model's own code;
  ``torch.compile``, ``AOTICompiledModel.__call__`` and ``torch.cuda.CUDAGraph.replay`` ran the model's own
  compiled code or captured graph, which a run does not hold; operator names (``aten::lstm``, the trace's own
  name for kernels outside any call) have no recorded inputs; and names of other profilers' scopes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from kernelscope.analyzer.rundir import COMPILED_REGION_CALL, GRAPH_REPLAY_CALL
from kernelscope.analyzer.sample_tensors import read_limit_bytes
from kernelscope.analyzer.samples import ObjectRepr, TensorMeta

from .calls import AOTI_CALL
from .layouts import device_mapper, map_arguments, rebuild
from .sample_descriptions import tensor_meta

REFUSED_CALLS = {
    COMPILED_REGION_CALL: "a torch.compile call ran the model's own compiled module or function, which the run "
    "does not hold",
    GRAPH_REPLAY_CALL: "a CUDA graph replay ran a graph the model captured, which the run does not hold",
    AOTI_CALL: "a loaded AOTInductor package ran the model's own compiled code, which the run does not hold",
}


class NotReplayable(Exception):
    """A call or a sample that cannot be replayed; ``status`` is ``refused`` or ``not kept``."""

    def __init__(self, reason: str, status: str = "refused") -> None:
        super().__init__(reason)
        self.reason, self.status = reason, status


@dataclass(frozen=True)
class Callee:
    """The callable a recorded call name stands for, and the expression that names it (for scripts)."""

    name: str
    function: Callable
    expression: str


def resolve_call(name: str) -> Callee:
    """The callable of a recorded call name (the module docstring's rule); NotReplayable otherwise."""
    if name in REFUSED_CALLS:
        raise NotReplayable(REFUSED_CALLS[name])
    if "::" in name:
        raise NotReplayable(f"{name} is an operator named from the trace, whose inputs are not recorded")
    head, _, rest = name.partition(".")
    if head == "triton" and rest:
        raise NotReplayable(f"{name} launched a Triton kernel of the model's own code, which the run does not hold")
    if rest == "apply" and head not in ("torch", "Tensor"):
        raise NotReplayable(f"{name} ran an autograd Function of the model's own code, which the run does not hold")
    if not rest:
        owner, path, expression = F, [name], f"torch.nn.functional.{name}"
    elif head == "Tensor":
        owner, path, expression = torch.Tensor, [rest], f"torch.Tensor.{rest}"
    elif head == "torch":
        owner, path, expression = torch, rest.split("."), name
    else:
        raise NotReplayable(f"{name!r} is not a name kernelscope gives a call (functional, torch.*, Tensor.*)")
    function: Any = owner
    for part in path:
        if not part.isidentifier() or not hasattr(function, part):
            raise NotReplayable(f"{expression} does not exist in this torch ({torch.__version__})")
        function = getattr(function, part)
    if not callable(function):
        raise NotReplayable(f"{expression} is not callable")
    return Callee(name, function, expression)


def error_reason(exc: Exception) -> str:
    """``Type: first line`` of an exception a replay met: the reason of a sample's row or warning."""
    if isinstance(exc, NotReplayable):
        return exc.reason
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def metadata_of(stored: Any) -> Any:
    """``stored`` (live arguments) with TensorMeta in place of its tensors: the layout a replay rebuilds."""
    return map_arguments(stored, lambda t: TensorMeta.from_json(tensor_meta(t)), _unchanged)


class SampleInputs:
    """Fresh inputs of one sample on ``device``, made on each ``make()``: the stored tensors rebuilt with the
    recorded layouts (``meta``, samples.json's TensorMeta structure), what was on the recording's device
    (``recorded_type``) moved to ``device``, devices named in the arguments moved with them."""

    def __init__(self, stored: tuple, meta: tuple, recorded_type: str, device: torch.device, not_kept: str) -> None:
        check_replayable(stored, meta, not_kept)
        self.stored = stored
        self.layouts: list[TensorMeta] = []
        _tensor_metas(meta, self.layouts)
        self.move = device_mapper(recorded_type, device)

    def make(self, move_devices: bool = True) -> tuple[tuple, dict]:
        """Fresh ``(args, kwargs)``; ``move_devices=False`` leaves the devices named in them as recorded."""
        layouts = iter(self.layouts)

        def placed(tensor: torch.Tensor) -> torch.Tensor:
            layout = next(layouts)
            target = self.move(torch.device(layout.device))
            if layout.stride is None:  # not strided (sparse…): as stored
                return tensor.to(target, copy=True)
            return rebuild(tensor, layout.shape, layout.stride, target)

        args, kwargs = map_arguments(self.stored, placed, self.move if move_devices else _unchanged)
        return tuple(args), dict(kwargs)

    @property
    def recorded_devices(self) -> list[str]:
        """The device each tensor was recorded on, in argument order (for scripts)."""
        return [layout.device for layout in self.layouts]


def _unchanged(value: Any) -> Any:
    return value


def check_replayable(stored: tuple, meta: tuple, not_kept: str) -> None:
    """NotReplayable unless the stored ``(args, kwargs)`` (samples.pt's, or live) hold a tensor of the recorded
    shape and dtype wherever samples.json's ``meta`` holds a TensorMeta, in the same containers; ``not kept``
    (with the reason ``not_kept``) where the recorder kept only the metadata."""
    (args, kwargs), (meta_args, meta_kwargs) = stored, meta
    _check(list(args), list(meta_args), not_kept, "args")
    _check(kwargs, meta_kwargs, not_kept, "kwargs")


def _check(stored: Any, meta: Any, not_kept: str, where: str) -> None:
    if isinstance(stored, TensorMeta):
        raise NotReplayable(not_kept, "not kept")
    if isinstance(meta, ObjectRepr):
        raise NotReplayable(f"{where} was a {meta.type}, which samples.pt keeps only as its repr")
    if isinstance(meta, TensorMeta):
        if not isinstance(stored, torch.Tensor):
            raise NotReplayable(f"{where} is a tensor in samples.json but not in the stored sample")
        if None in meta.shape:
            raise NotReplayable(f"{where} is a nested tensor ({meta}), whose ragged sizes a replay cannot make")
        try:
            torch.device(meta.device)
        except RuntimeError:  # a samples.json written by hand, or by a torch with other devices
            raise NotReplayable(f"{where} was recorded on {meta.device!r}, a device this torch does not know") from None
        dtype = str(stored.dtype).removeprefix("torch.")
        if list(stored.shape) != list(meta.shape) or dtype != meta.dtype:
            raise NotReplayable(f"{where} is stored as {dtype}{list(stored.shape)}, recorded as {meta}")
        _check_strides(stored, meta, where)
    elif isinstance(meta, (tuple, list)):
        if not isinstance(stored, (tuple, list)) or len(stored) != len(meta):
            raise NotReplayable(f"{where} does not hold the {len(meta)} items samples.json records")
        for i, (s, m) in enumerate(zip(stored, meta, strict=True)):
            _check(s, m, not_kept, f"{where}[{i}]")
    elif isinstance(meta, dict):
        if not isinstance(stored, dict) or list(stored) != list(meta):
            raise NotReplayable(f"{where} does not hold the keys samples.json records")
        for key in meta:
            _check(stored[key], meta[key], not_kept, f"{where}[{key!r}]")


def _check_strides(stored: torch.Tensor, meta: TensorMeta, where: str) -> None:
    """NotReplayable unless ``meta``'s strides (a samples.json written by hand may hold any) lay out its shape in a
    storage that reading sample tensors may take (layouts.rebuild makes that storage)."""
    if meta.stride is None:
        return
    if len(meta.stride) != len(meta.shape) or any(step < 0 for step in meta.stride):
        raise NotReplayable(f"{where} has strides {list(meta.stride)}, not one per dimension >= 0 ({meta})")
    extent = (
        0 if 0 in meta.shape else 1 + sum((size - 1) * step for size, step in zip(meta.shape, meta.stride, strict=True))
    )
    limit = read_limit_bytes()
    if extent * stored.element_size() > limit:
        raise NotReplayable(f"{where} has strides {list(meta.stride)} whose storage would take more than {limit} bytes")


def _tensor_metas(meta: Any, into: list) -> None:
    if isinstance(meta, TensorMeta):
        into.append(meta)
    elif isinstance(meta, (tuple, list)):
        for value in meta:
            _tensor_metas(value, into)
    elif isinstance(meta, dict):
        for value in meta.values():
            _tensor_metas(value, into)
