"""torchvision for the zoo sweep on a CPU-only torch: PyPI's torchvision wheel is built against CUDA torch, so its C
ops (``torch.ops.torchvision.*``) fail to load beside the CPU build (libc10_cuda.so missing) and ``import
torchvision`` raises. Before importing it, this defines the two ops its models call that have no pure-torch path,
``torchvision::nms`` and ``torchvision::qnms``, as torch.library custom ops in plain torch (so the trace holds a
``torchvision::nms`` operator as with the C op); ``roi_align`` takes torchvision's own pure-torch path, the one it
uses where its ops are absent."""

from __future__ import annotations

import torch


def _nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Greedy non-maximum suppression, as torchvision's CPU kernel: indices kept, by decreasing score."""
    order = scores.argsort(descending=True)
    x1, y1, x2, y2 = boxes.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    suppressed = torch.zeros(len(order), dtype=torch.bool)
    keep = []
    for position in range(len(order)):
        i = order[position]
        if suppressed[position]:
            continue
        keep.append(i)
        rest = order[position + 1 :]
        width = (torch.minimum(x2[i], x2[rest]) - torch.maximum(x1[i], x1[rest])).clamp(min=0)
        height = (torch.minimum(y2[i], y2[rest]) - torch.maximum(y1[i], y1[rest])).clamp(min=0)
        overlap = width * height
        iou = overlap / (areas[i] + areas[rest] - overlap)
        suppressed[position + 1 :] |= iou > iou_threshold
    return torch.stack(keep) if keep else torch.empty(0, dtype=torch.long)


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
