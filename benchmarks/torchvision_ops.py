"""torchvision for the zoo sweep on a CPU-only torch: PyPI's torchvision wheel is built against CUDA torch, so its C
ops (``torch.ops.torchvision.*``) fail to load beside the CPU build (libc10_cuda.so missing) and ``import
torchvision`` raises. Before importing it, this defines the two ops its models call that have no pure-torch path,
``torchvision::nms`` and ``torchvision::qnms``, as torch.library custom ops in plain torch (so the trace holds a
``torchvision::nms`` operator as with the C op); ``roi_align`` takes torchvision's own pure-torch path, the one it
uses where its ops are absent."""

from __future__ import annotations

import numpy
import torch


def _nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Greedy non-maximum suppression, as torchvision's CPU kernel: indices kept, by decreasing score. The greedy
    walk runs in numpy, so that the trace holds a few operators per call, as the C kernel's does, not a few per box."""
    order = scores.argsort(descending=True)
    ordered = boxes[order]
    lower = torch.maximum(ordered[:, None, :2], ordered[None, :, :2])
    upper = torch.minimum(ordered[:, None, 2:], ordered[None, :, 2:])
    overlap = (upper - lower).clamp(min=0).prod(2)
    areas = (ordered[:, 2:] - ordered[:, :2]).prod(1)
    overlaps = (overlap / (areas[:, None] + areas[None, :] - overlap) > iou_threshold).numpy()
    suppressed = numpy.zeros(len(order), dtype=bool)
    keep = []
    for position in range(len(order)):
        if not suppressed[position]:
            keep.append(position)
            suppressed |= overlaps[position]
    return order[torch.tensor(keep, dtype=torch.long)]


def load() -> object:
    """Import torchvision with working ops on this torch; returns the module."""
    import importlib.util

    if not hasattr(torch.ops.torchvision, "nms"):
        spec = importlib.util.find_spec("torchvision")
        if spec is None:
            raise ModuleNotFoundError("torchvision is not installed")
        try:
            torch.ops.load_library(str(__import__("pathlib").Path(spec.origin).parent / "_C.so"))
        except OSError:  # the CUDA wheel beside a CPU torch: define the ops its models need
            for name in ("nms", "qnms"):
                torch.library.custom_op(f"torchvision::{name}", mutates_args=())(_typed_nms)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torchvision
    if not torchvision.extension._has_ops():
        torchvision.extension._has_ops = lambda: True  # ops.boxes asks before calling torch.ops.torchvision.nms
    return torchvision


def _typed_nms(dets: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    return _nms(dets, scores, iou_threshold)
