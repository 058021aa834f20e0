"""timm architectures for cpu_sweep.py, with random weights (no download), batch 1, eval: every tiny ``test_*``
model timm registers (ViT and its relative-position variant, ConvNeXt, EfficientNet with batch, group and layer
norm and EvoNorm, NFNet, ResNet, ByobNet, CoAtNet, MaxViT, MambaOut) and one small member of many families at a
small input (64-128 px where the family takes any size, its own size where it fixes one); RepVGG, FastViT and
MobileOne also after ``reparameterize_model()``, which folds their branches into one convolution.

A model whose every ``nn.Conv2d`` runs once per pass states one ``conv2d`` call per such module, in it."""

from __future__ import annotations

import torch
from sweep_cpu_zoo_torchvision import ZOO_NOTES, _conv_expectations
from workload import Workload

# family member -> input side (px); None: the model's own pretrained_cfg size
FAMILIES = {
    "vit_tiny_patch16_224": 64, "deit_tiny_patch16_224": 64, "swin_tiny_patch4_window7_224": None,
    "convnext_atto": 64, "efficientnet_b0": 64, "regnety_002": 64, "mobilenetv3_small_050": 64,
    "mobilenetv4_conv_small": 64, "coatnet_nano_rw_224": None, "maxvit_nano_rw_256": None,
    "eva02_tiny_patch14_224": 56, "beit_base_patch16_224": 64, "pit_ti_224": None, "twins_svt_small": 64,
    "poolformer_s12": 64, "hiera_tiny_224": None, "fastvit_t8": 64, "repvgg_a0": 64, "mobileone_s0": 64,
    "dm_nfnet_f0": 64, "cait_xxs24_224": 64, "levit_128s": None, "mobilevit_xxs": 64, "efficientvit_b0": 64,
    "ghostnetv2_100": 64, "res2net50_14w_8s": 64, "resnest14d": 64, "xcit_nano_12_p16_224": 64,
    "davit_tiny": 64, "edgenext_xx_small": 64, "convit_tiny": 64, "mixer_s16_224": None, "resmlp_12_224": None,
    "dla34": 64, "dpn48b": 64, "cspresnet50": 64, "rexnet_100": 64, "lcnet_050": 64, "mixnet_s": 64,
    "hgnetv2_b0": 64, "inception_next_tiny": 64, "vovnet39a": 64, "xception41": 64, "mambaout_femto": 64,
    "starnet_s1": 64, "repvit_m0_9": 64, "tiny_vit_5m_224": None, "pvt_v2_b0": 64, "mvitv2_tiny": None,
    "halonet26t": None, "botnet26t_256": None, "gernet_s": 64, "ghostnet_050": 64, "resnetv2_50": 64,
    "nf_regnet_b0": 64, "efficientvit_m0": None, "sequencer2d_s": None, "volo_d1_224": None, "gcvit_xxtiny": None,
    "focalnet_tiny_srf": 64, "crossvit_tiny_240": None, "vitamin_small_224": None, "shvit_s1": 64,
}  # fmt: skip
REPARAMETERIZED = ("repvgg_a0", "fastvit_t8", "mobileone_s0")


def _build(name: str, side: int | None, reparameterize: bool = False) -> Workload:
    import torchvision_ops

    torchvision_ops.load()  # timm imports torchvision
    import timm
    from timm.utils.model import reparameterize_model

    kwargs = {} if side is None or name.startswith("test_") else {"img_size": side}
    try:
        model = timm.create_model(name, pretrained=False, **kwargs)
    except TypeError:  # the family takes no img_size: any input size works
        model = timm.create_model(name, pretrained=False)
    model = model.eval()
    if reparameterize:
        model = reparameterize_model(model)
    if side is None or name.startswith("test_"):
        side = model.pretrained_cfg["input_size"][-1]
    samples = [((torch.randn(1, 3, side, side),), {})]
    label = f"timm_{name}" + ("_reparameterized" if reparameterize else "")
    return Workload(label, model, samples, model, f"timm {name}", notes={**_conv_expectations(model), **ZOO_NOTES})


def _names() -> list[str]:
    try:
        import torchvision_ops

        torchvision_ops.load()
        import timm
    except Exception:  # timm absent: no programs
        return []
    return sorted(timm.list_models("test_*"))


TIMM_MODELS = {f"timm_{name}": (lambda name=name: _build(name, None)) for name in _names()}
TIMM_MODELS.update({f"timm_{name}": (lambda name=name, side=side: _build(name, side)) for name, side in
                    (FAMILIES.items() if _names() else ())})  # fmt: skip
TIMM_MODELS.update({f"timm_{name}_reparameterized": (lambda name=name: _build(name, FAMILIES[name], True))
                    for name in (REPARAMETERIZED if _names() else ())})  # fmt: skip
