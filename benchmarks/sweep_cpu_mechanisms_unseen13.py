"""Programs for cpu_sweep.py around mechanisms the earlier program files leave out: functionals made by
``boolean_dispatch`` called for their indices (max pooling into max unpooling), fractional max pooling's random
regions under a seed, a loss given a distance callable that calls functionals itself, functionals that are a module
class's ``staticmethod`` forward or an instance's ``forward``, or that an instance's ``forward`` holds (a closure, a
callable object, a default), losses, norms and activations the other programs leave out, layers none builds (a ReLU
RNN, ChannelShuffle, LPPool, MaxUnpool, the legacy pre-hook ``weight_norm``).

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import _w, _x
from torch import nn


class PoolUnpool(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        h = self.conv(x)
        pooled, indices = F.max_pool2d(h, 2, return_indices=True)
        restored = F.max_unpool2d(pooled, indices, 2, output_size=h.shape[-2:])
        peaks, where = F.adaptive_max_pool1d(h.flatten(2), 4, return_indices=True)
        return restored, peaks, where


def pool_unpool_indices():
    return _w("pool_unpool_indices", PoolUnpool().eval(), samples=[((_x(2, 3, 8, 8),), {})], description="max_pool2d "
              "and adaptive_max_pool1d (boolean_dispatch functionals) with return_indices=True, the indices given to "
              "max_unpool2d", calls={"max_pool2d": 1, "max_unpool2d": 1, "adaptive_max_pool1d": 1},
              modules={"max_unpool2d": {""}})  # fmt: skip


class FractionalPools(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.FractionalMaxPool2d(2, output_ratio=0.5)

    def forward(self, x):
        h = self.conv(x)
        return self.pool(h), F.fractional_max_pool2d(h, 3, output_size=5, return_indices=True)


def fractional_max_pool_seeded():
    model = FractionalPools().eval()

    def seeded(x):  # fractional pooling draws its regions with torch.rand in every call: seeded per call
        torch.manual_seed(0)
        return model(x)

    return _w("fractional_max_pool_seeded", model, fn=seeded, samples=[((_x(2, 3, 10, 10),), {})],
              description="nn.FractionalMaxPool2d and F.fractional_max_pool2d (return_indices) drawing random "
              "regions, seeded per call", calls={"fractional_max_pool2d": 2},
              # without indices it calls the public fractional_max_pool2d_with_indices, the innermost call (SPEC)
              modules={"fractional_max_pool2d": {""}, "fractional_max_pool2d_with_indices": {"pool"}})  # fmt: skip


class TripletByCosine(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(16, 8)

    def forward(self, anchor, positive, negative):
        a, p, n = self.embed(anchor), self.embed(positive), self.embed(negative)
        distance = lambda u, v: 1 - F.cosine_similarity(u, v)  # noqa: E731 (a lambda, as users write it)
        return F.triplet_margin_with_distance_loss(a, p, n, distance_function=distance, margin=0.5, swap=True)


def triplet_distance_callable():
    samples = [((_x(4, 16), _x(4, 16), _x(4, 16)), {})]
    return _w("triplet_distance_callable", TripletByCosine().eval(), samples=samples, description="F.triplet_margin_"
              "with_distance_loss given a lambda that calls F.cosine_similarity (called three times with swap=True)",
              calls={"triplet_margin_with_distance_loss": 1, "cosine_similarity": 3})  # fmt: skip


class StaticGelu(nn.Module):
    forward = staticmethod(F.gelu)  # the functional itself is the class's forward


class StaticSoftmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.forward = F.softmax  # an instance attribute: nn.Module.__call__ finds it before the class's forward


class HeldForwards(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.act, self.norm = nn.Linear(16, 16), StaticGelu(), StaticSoftmax()

    def forward(self, x):
        return self.norm(self.act(self.fc(x)), dim=-1)


def staticmethod_functional_forward():
    return _w("staticmethod_functional_forward", HeldForwards().eval(), description="children whose forward is a "
              "functional: staticmethod(F.gelu) on the class, F.softmax assigned to the instance's forward",
              modules={"gelu": {"act"}, "softmax": {"norm"}}, calls={"gelu": 1, "softmax": 1})  # fmt: skip


class Activation:
    """A callable of the model's own holding its functional, as configs and registries make them."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, x):
        return self.fn(x)


def _with_forward(forward) -> nn.Module:
    module = nn.Module()
    module.forward = forward
    return module


class ForwardsHolding(nn.Module):
    def __init__(self):
        super().__init__()
        act = F.gelu
        self.fc = nn.Linear(16, 16)
        self.closure, self.callable = _with_forward(lambda x: act(x)), _with_forward(Activation(F.silu))
        self.default = _with_forward(lambda x, fn=F.elu: fn(x))

    def forward(self, x):
        return self.default(self.callable(self.closure(self.fc(x))))


def forward_holding_functionals():
    return _w("forward_holding_functionals", ForwardsHolding().eval(), description="plain nn.Modules whose "
              "instance forward holds a functional: a lambda closing over F.gelu, a callable object holding F.silu, "
              "a lambda with F.elu as a default", modules={"gelu": {"closure"}, "silu": {"callable"},
              "elu": {"default"}}, calls={"gelu": 1, "silu": 1, "elu": 1})  # fmt: skip


class RareLosses(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 6)

    def forward(self, x, labels, multi):
        out = self.fc(x)
        positive, a, b = out.exp(), out[:, :3], out[:, 3:]
        ones = torch.ones(len(x))
        signs = torch.where(labels % 2 == 0, ones, -ones)
        return torch.stack([
            F.gaussian_nll_loss(a, b, positive[:, 3:], full=True), F.poisson_nll_loss(out, positive.detach()),
            F.huber_loss(a, b, delta=0.5), F.smooth_l1_loss(a, b, beta=0.5), F.l1_loss(a, b),
            F.multi_margin_loss(out, labels), F.multilabel_soft_margin_loss(out, multi.float()),
            F.multilabel_margin_loss(out, multi * 0 + torch.tensor([1, 3, -1, 0, 0, 0])),
            F.hinge_embedding_loss(a.sum(1), signs), F.cosine_embedding_loss(a, b, signs),
            F.margin_ranking_loss(a[:, 0], b[:, 0], signs), F.soft_margin_loss(a[:, 0], signs),
            F.binary_cross_entropy(torch.sigmoid(a), multi[:, :3].float()),
        ])  # fmt: skip


def rare_losses():
    labels, multi = torch.tensor([0, 1, 2, 5]), torch.randint(0, 2, (4, 6))
    losses = ["gaussian_nll_loss", "poisson_nll_loss", "huber_loss", "smooth_l1_loss", "l1_loss", "multi_margin_loss",
              "multilabel_soft_margin_loss", "multilabel_margin_loss", "hinge_embedding_loss",
              "cosine_embedding_loss", "margin_ranking_loss", "soft_margin_loss", "binary_cross_entropy"]  # fmt: skip
    return _w("rare_losses", RareLosses().eval(), samples=[((_x(4, 16), labels, multi), {})], description="thirteen "
              "losses the other programs leave out, some calling other functionals inside",
              calls=dict.fromkeys(losses, 1), modules=dict.fromkeys(losses, {""}))  # fmt: skip


class UncalledFunctionals(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.alpha = nn.Parameter(torch.full((8,), 0.2))
        self.bilinear_weight = nn.Parameter(torch.randn(5, 8, 8) * 0.1)

    def forward(self, x):
        h = F.pad(self.conv(x), (1, 1, 1, 1), mode="reflect")
        h = F.group_norm(h, 4) + F.instance_norm(h) + F.rms_norm(h, (h.shape[-1],))
        h = F.prelu(F.local_response_norm(h, 3), self.alpha)
        h = F.glu(torch.cat([h, F.rrelu(h, training=False)], dim=1), dim=1)
        dropped = F.alpha_dropout(F.feature_alpha_dropout(h, training=False))
        h = F.dropout1d(dropped.flatten(2), training=False).view_as(h)
        h = F.pixel_unshuffle(F.pad(h, (0, 0, 0, 0), mode="circular"), 2)
        pooled = F.lp_pool2d(h, 2.0, 2).flatten(1)[:, :8]
        return F.bilinear(pooled, pooled, self.bilinear_weight), F.hardtanh_(h.clone(), -0.5, 0.5)


def functionals_not_yet_called():
    called = ["pad", "group_norm", "instance_norm", "rms_norm", "prelu", "local_response_norm", "glu", "rrelu",
              "pixel_unshuffle", "lp_pool2d", "bilinear"]  # fmt: skip
    return _w("functionals_not_yet_called", UncalledFunctionals().eval(), samples=[((_x(2, 4, 8, 8),), {})],
              description="norms, activations, paddings and poolings the other programs leave out (group_norm, "
              "instance_norm, rms_norm, prelu, glu, rrelu, alpha dropouts, pixel_unshuffle, lp_pool2d, bilinear, "
              "hardtanh_)", modules=dict.fromkeys(called, {""}),
              calls={"pad": 3, "glu": 1, "bilinear": 1})  # pad: twice here, once by local_response_norm  # fmt: skip


class RareLayers(nn.Module):
    def __init__(self):
        super().__init__()
        with warnings.catch_warnings():  # the legacy weight_norm warns that it is deprecated
            warnings.simplefilter("ignore", FutureWarning)
            self.conv = nn.utils.weight_norm(nn.Conv2d(4, 8, 3, padding=1))  # a forward pre-hook sets .weight
        self.shuffle, self.pool = nn.ChannelShuffle(2), nn.MaxPool2d(2, return_indices=True)
        self.unpool, self.lp = nn.MaxUnpool2d(2), nn.LPPool2d(2, 2)
        self.flatten, self.rnn = nn.Flatten(2), nn.RNN(8, 8, num_layers=2, nonlinearity="relu", bidirectional=True)
        self.cell, self.distance = nn.GRUCell(16, 8), nn.PairwiseDistance()

    def forward(self, x):
        h = self.shuffle(self.conv(x))
        pooled, indices = self.pool(h)
        h = self.lp(self.unpool(pooled, indices))
        seq, _ = self.rnn(self.flatten(h).permute(2, 0, 1))
        state = torch.zeros(x.shape[0], 8)
        for step in seq:
            state = self.cell(step, state)
        return self.distance(state, seq[-1, :, :8])


def rare_layers():
    return _w("rare_layers", RareLayers().eval(), samples=[((_x(2, 4, 8, 8),), {})], description="legacy "
              "nn.utils.weight_norm (a forward pre-hook), ChannelShuffle, MaxPool2d with indices into MaxUnpool2d, "
              "LPPool2d, Flatten, a two-layer bidirectional ReLU RNN, a GRUCell loop, PairwiseDistance",
              modules={"max_unpool2d": {"unpool"}, "lp_pool2d": {"lp"}, "pairwise_distance": {"distance"}},
              calls={"lp_pool2d": 1, "max_unpool2d": 1})  # fmt: skip


UNSEEN13_MECHANISMS = {f.__name__: f for f in (
    pool_unpool_indices, fractional_max_pool_seeded, triplet_distance_callable, staticmethod_functional_forward,
    forward_holding_functionals, rare_losses, functionals_not_yet_called, rare_layers,
)}  # fmt: skip
