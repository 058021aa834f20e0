"""Every builder of ``torchvision.models.list_models()`` for cpu_sweep.py, with random weights and small inputs
(batch 1, 64-128 px, 4-8 frames; eval): classification, detection (Faster/Mask/Keypoint R-CNN, RetinaNet, FCOS, SSD,
SSDlite), segmentation, video, optical flow (RAFT, few flow updates) and the quantized models (quantized on the
CPU from random weights, no download). torchvision's ops load as torchvision_ops.py says.

A CNN whose every ``nn.Conv2d``/``nn.Conv3d`` (or subclass) runs once per pass states what a user expects of it:
one ``conv2d`` (``conv3d``) call per such module, its rows in exactly those modules. A larger builder of a class
that a smaller builder runs with the same code, and the three that take only 224 px and 16 frames (S3D, MViT), are
reported as skipped with that reason: the zoo sweep has ten minutes of two shared cores."""

from __future__ import annotations

import torch
from torch import nn
from workload import Workload

# a larger builder of a class that a smaller builder here runs with the same code: minutes of the sweep each on two
# shared cores; the builder named runs instead
SAME_CODE_AS = {
    **{name: "vit_b_16" for name in ("vit_h_14", "vit_l_16", "vit_l_32")},
    **{name: "regnet_y_400mf" for name in ("regnet_y_128gf", "regnet_y_32gf", "regnet_y_16gf", "regnet_y_8gf",
                                           "regnet_y_3_2gf", "regnet_y_1_6gf", "regnet_y_800mf")},
    **{name: "regnet_x_400mf" for name in ("regnet_x_32gf", "regnet_x_16gf", "regnet_x_8gf", "regnet_x_3_2gf",
                                           "regnet_x_1_6gf", "regnet_x_800mf")},
    **{name: "convnext_tiny" for name in ("convnext_large", "convnext_base", "convnext_small")},
    **{name: "efficientnet_b0" for name in ("efficientnet_b7", "efficientnet_b6", "efficientnet_b5", "efficientnet_b4",
                                            "efficientnet_b3", "efficientnet_b2", "efficientnet_b1")},
    **{name: "efficientnet_v2_s" for name in ("efficientnet_v2_l", "efficientnet_v2_m")},
    **{name: "resnet50" for name in ("wide_resnet101_2", "wide_resnet50_2", "resnext101_64x4d", "resnext101_32x8d",
                                     "resnet152", "resnet101", "resnext50_32x4d")},
    **{name: "quantized_resnet50" for name in ("quantized_resnext101_32x8d", "quantized_resnext101_64x4d")},
    **{name: "quantized_shufflenet_v2_x0_5"
       for name in ("quantized_shufflenet_v2_x1_0", "quantized_shufflenet_v2_x1_5", "quantized_shufflenet_v2_x2_0")},
    **{name: "shufflenet_v2_x0_5" for name in ("shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0")},
    **{name: "mnasnet0_5" for name in ("mnasnet0_75", "mnasnet1_0", "mnasnet1_3")},
    **{name: "densenet121" for name in ("densenet161", "densenet169", "densenet201")},
    **{name: "vgg11_bn" for name in ("vgg13_bn", "vgg16_bn", "vgg19_bn")},
    **{name: "vgg11" for name in ("vgg13", "vgg16", "vgg19")},
    **{name: "swin_t" for name in ("swin_s", "swin_b")},
    **{name: "swin_v2_t" for name in ("swin_v2_s", "swin_v2_b")},
    **{name: "swin3d_t" for name in ("swin3d_s", "swin3d_b")},
    "fcn_resnet101": "fcn_resnet50", "deeplabv3_resnet101": "deeplabv3_resnet50", "squeezenet1_1": "squeezenet1_0",
}  # fmt: skip
# builders that take only 224 px and 16 frames (their pooling or position embeddings fix the size): minutes each
ONLY_FULL_SIZE = {"s3d", "mvit_v1_b", "mvit_v2_s"}

DETECTION_SIZE = {"ssd300_vgg16": 300, "ssdlite320_mobilenet_v3_large": 320}
IMAGE_SIZE = {"maxvit_t": 224, "inception_v3": 96, "quantized_inception_v3": 96, "googlenet": 64}
BUILD_KWARGS = {"vit_b_16": {"image_size": 64}, "vit_b_32": {"image_size": 64},
                "inception_v3": {"init_weights": True}, "googlenet": {"init_weights": True}}  # fmt: skip
# one warm-up, and no raise checks (ten more passes each; the mechanism sweeps raise mid-pass in every kind of
# module): a model costs a quarter of a minute, not a minute
ZOO_NOTES = {"warmup": 1, "no_raise_check": True}
CONV_CALLS_UNSTATED = {"raft_large", "raft_small"}  # RAFT's update block runs its convolutions once per flow update


def _tv():
    import torchvision_ops

    return torchvision_ops.load()


# auxiliary classifiers that run in training only: their convolutions make no call in eval
NOT_RUN_IN_EVAL = ("aux1.", "aux2.", "AuxLogits.")


def _conv_expectations(model: nn.Module) -> dict:
    """One conv call per convolution module, in that module (a CNN that runs each of them once per pass)."""
    notes = {"modules": {}, "calls": {}}
    for kind, call in ((nn.Conv2d, "conv2d"), (nn.Conv3d, "conv3d")):
        names = {name for name, m in model.named_modules() if isinstance(m, kind)
                 and not name.startswith(NOT_RUN_IN_EVAL)}  # fmt: skip  # subclasses too
        if names:
            notes["modules"][call], notes["calls"][call] = names, len(names)
    return notes


def _build(name: str) -> Workload:
    tv = _tv()
    if name in SAME_CODE_AS:
        raise RuntimeError(f"{name} runs the code of {SAME_CODE_AS[name]}, which the sweep runs: left out for time")
    if name in ONLY_FULL_SIZE:
        raise RuntimeError(f"{name} takes only 224 px and 16 frames: minutes of the sweep on two cores")
    kwargs = dict(BUILD_KWARGS.get(name, {}))
    if name.startswith("quantized_"):
        kwargs["quantize"] = True  # fbgemm, calibrated on random input by the builder itself
    if name.startswith(("fasterrcnn", "maskrcnn", "keypointrcnn", "retinanet", "fcos")):
        kwargs.update(weights_backbone=None, min_size=96, max_size=128)
    elif name.startswith(("ssd", "deeplab", "fcn", "lraspp")):
        kwargs["weights_backbone"] = None
    model = tv.models.get_model(name, **kwargs).eval()
    notes: dict = {}
    info = tv.models.get_model_builder(name).__module__
    if ".detection." in info:
        size = DETECTION_SIZE.get(name, 128)
        samples = [(([torch.rand(3, size, size - 16)],), {})]
    elif ".video." in info:
        samples = [((torch.randn(1, 3, 4, 64, 64),), {})]
    elif ".optical_flow." in info:
        samples = [((torch.rand(1, 3, 128, 128), torch.rand(1, 3, 128, 128)), {"num_flow_updates": 2})]
    else:
        size = IMAGE_SIZE.get(name, 64)
        samples = [((torch.randn(1, 3, size, size),), {})]
    if ".detection." not in info and name not in CONV_CALLS_UNSTATED:
        notes.update(_conv_expectations(model))
    return Workload(f"tv_{name}", model, samples, model, f"torchvision {name}", notes={**notes, **ZOO_NOTES})


def _names() -> list[str]:
    try:
        return _tv().models.list_models()
    except Exception:  # torchvision absent: no programs
        return []


TORCHVISION_MODELS = {f"tv_{name}": (lambda name=name: _build(name)) for name in _names()}
