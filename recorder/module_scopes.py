"""Which observed modules get a scope of their own (recorder/instrument.py): none for a module whose forward launches
no kernel of its own; the call's for a torch.nn module whose forward is one functional call (its scope folded into
that call's: ``ks.fn:linear#3@encoder.fc``)."""

from __future__ import annotations

import os

from torch import nn

from .hooked_calls import global_forward_hooks, has_forward_hooks

_DROPOUTS = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)


def launches_no_kernel(module: nn.Module) -> bool:
    """Modules whose forward launches no kernel of its own get no scope (it would cost a scope per call and
    own no row): ``nn.Identity``; dropout modules in eval mode, whose functional returns its input; and the
    modules that only call their children (``only_calls_its_children``)."""
    kind = type(module)
    if (kind is nn.Identity or kind in _DROPOUTS and not module.training) and _torch_forward(kind):
        return True
    return only_calls_its_children(module)


def _torch_forward(kind: type) -> bool:
    """Whether the class's forward is still torch's own (defined in torch.nn.modules), not one a library bound on the
    torch class before the recording (``nn.Linear.forward = noisy_forward``), which may do anything."""
    code = getattr(getattr(kind, "forward", None), "__code__", None)
    return code is not None and os.path.dirname(code.co_filename) == _TORCH_MODULES_FOLDER


def only_calls_its_children(module: nn.Module) -> bool:
    """``nn.Sequential``, whose forward only calls its children (each scoped), unless a hook on a child
    could launch kernels inside it."""
    if type(module) is not nn.Sequential or not _torch_forward(nn.Sequential):
        return False
    return not (global_forward_hooks() or any(has_forward_hooks(child) for child in module.children()))


# torch.nn classes whose forward is exactly one functional call and nothing that launches a kernel besides
# (torch's own code: the exact class, not a subclass): a functional is scoped in every mode, so the module's
# scope folds into its call's, one scope instead of two. Conv: only with padding_mode "zeros" (else F.pad
# first); batch norm: only in eval mode (in training it also counts its batches with Tensor.add_).
_SINGLE_CALL = {
    nn.Linear, nn.Bilinear, nn.Embedding, nn.LayerNorm, nn.RMSNorm, nn.GroupNorm, nn.LocalResponseNorm,
    nn.ReLU, nn.ReLU6, nn.GELU, nn.SiLU, nn.Mish, nn.ELU, nn.LeakyReLU, nn.Hardtanh, nn.Hardswish,
    nn.Hardsigmoid, nn.GLU, nn.Softplus, nn.Softmax, nn.LogSoftmax,
    nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d,
    nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d, nn.Upsample, nn.PixelShuffle,
    *_DROPOUTS,
}  # fmt: skip
_TORCH_MODULES_FOLDER = os.path.dirname(nn.modules.linear.__file__)
_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def folds_into_its_call(module: nn.Module) -> bool:
    """Whether the module's scope is folded into the scope of the one functional call its forward makes."""
    kind = type(module)
    if "forward" in vars(module) or module._modules or not _torch_forward(kind):  # not torch's forward
        return False
    if kind in _CONVS:
        return module.padding_mode == "zeros"
    if kind in _BATCH_NORMS:
        return not module.training
    return kind in _SINGLE_CALL
