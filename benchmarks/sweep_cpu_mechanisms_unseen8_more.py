"""Programs for cpu_sweep.py around torch's library modules and calls that the other sweep files leave out: mixtures
and transformed distributions of torch.distributions, bidirectional multi-layer LSTM (with ``proj_size``) and GRU over
unsorted packed sequences, the full ``nn.Transformer`` with every mask, ``nn.MultiheadAttention`` returning per-head
weights with a key padding mask and separate key/value sizes, sampling and folding calls (``grid_sample``, ``unfold``,
``fold``, ``interpolate`` modes), routing by ``cdist``/``topk``/``sort``/``unique``, quantiles and nan-reductions,
LU and triangular solves, a GCN on a sparse adjacency built in its forward, a forward that leaves for NumPy and comes
back, an autocast decorator on a forward, samples of three batch sizes.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, _w, _x
from torch import distributions as D  # noqa: N812
from torch import nn
from torch.nn.utils import rnn


class MixtureHead(nn.Module):
    def __init__(self, d: int = 16, k: int = 3):
        super().__init__()
        self.logits, self.loc, self.scale = nn.Linear(d, k), nn.Linear(d, k * 2), nn.Linear(d, k * 2)

    def forward(self, x, y):
        comp = D.Independent(D.Normal(self.loc(x).unflatten(-1, (3, 2)),
                                      F.softplus(self.scale(x)).unflatten(-1, (3, 2)) + 1e-3), 1)  # fmt: skip
        mixture = D.MixtureSameFamily(D.Categorical(logits=self.logits(x)), comp)
        steps = [D.transforms.AffineTransform(1.0, 2.0), D.transforms.TanhTransform()]
        flow = D.TransformedDistribution(D.Normal(torch.zeros(2), torch.ones(2)), steps)
        kl = D.kl_divergence(D.Categorical(logits=self.logits(x)), D.Categorical(logits=torch.zeros(3)))
        return mixture.log_prob(y), mixture.mean, flow.log_prob(y.clamp(-0.9, 0.9)), kl


def distribution_mixtures():
    return _w("distribution_mixtures", MixtureHead().eval(), samples=[((_x(4, 16), _x(4, 2) * 0.3), {})],
              description="torch.distributions in a forward: MixtureSameFamily of Independent Normals, a "
              "TransformedDistribution through Affine and Tanh transforms, kl_divergence of Categoricals",
              modules={"softplus": {""}, "linear": {"logits", "loc", "scale"}}, calls={"softplus": 1})  # fmt: skip


class PackedRecurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 12, num_layers=2, bidirectional=True, batch_first=True, proj_size=6)
        self.gru = nn.GRU(12, 5, bidirectional=True, batch_first=True)

    def forward(self, x, lengths):
        packed = rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, (h, c) = self.lstm(packed)
        out, _ = self.gru(out)
        padded, sizes = rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return padded, sizes, h, c


def packed_bidirectional():
    return _w("packed_bidirectional", PackedRecurrent().eval(), samples=[((_x(3, 7, 8), torch.tensor([4, 7, 2])),
              {})], description="a 2-layer bidirectional LSTM with proj_size and a bidirectional GRU over an "
              "unsorted packed sequence, padded back to the input's length", modules={"aten::lstm": {"lstm"},
              "aten::gru": {"gru"}})  # fmt: skip


class FullTransformer(nn.Module):
    def __init__(self, d: int = 16, vocab: int = 20):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        self.transformer = nn.Transformer(d, 2, 2, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, src, tgt):
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        out = self.transformer(self.embed(src), self.embed(tgt), tgt_mask=tgt_mask, tgt_is_causal=True,
                               src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt == 0,
                               memory_key_padding_mask=src == 0)  # fmt: skip
        return self.head(out)


def transformer_encoder_decoder():
    src = torch.tensor([[3, 4, 5, 6, 0, 0], [7, 8, 9, 1, 2, 3]])
    tgt = torch.tensor([[1, 2, 3, 0], [4, 5, 6, 7]])
    return _w("transformer_encoder_decoder", FullTransformer().eval(), samples=[((src, tgt), {})],
              description="nn.Transformer, encoder and decoder, with a causal target mask and source, target and "
              "memory key padding masks (the encoder on its fast path)", modules={"embedding": {"embed"},
              "linear": {"head", *(f"transformer.decoder.layers.{i}.{m}" for i in range(2) for m in ("linear1",
              "linear2", "self_attn", "multihead_attn"))}})  # fmt: skip


class AttendsWithWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 4, kdim=12, vdim=10)  # separate projection weights, sequence first

    def forward(self, q, k, v, padding):
        bias = torch.zeros(q.shape[0], k.shape[0]).masked_fill(torch.ones(q.shape[0], k.shape[0]).triu(3) > 0, -1e4)
        out, weights = self.attn(q, k, v, key_padding_mask=padding, attn_mask=bias, need_weights=True,
                                 average_attn_weights=False)  # fmt: skip
        return out, weights.sum(1)


def mha_weights_padding():
    padding = torch.tensor([[False] * 5 + [True], [False] * 6])
    return _w("mha_weights_padding", AttendsWithWeights().eval(), samples=[((_x(4, 2, 16), _x(6, 2, 12),
              _x(6, 2, 10), padding), {})], description="nn.MultiheadAttention with kdim/vdim (separate "
              "projections), a float attention mask, a key padding mask, per-head weights returned",
              modules={"multi_head_attention_forward": {"attn"}, "linear": {"attn"}, "softmax": {"attn"}},
              calls={"multi_head_attention_forward": 1})  # fmt: skip


class Resamples(nn.Module):
    def __init__(self):
        super().__init__()
        self.theta = nn.Linear(6, 6)
        self.unfold, self.fold = nn.Unfold(3, padding=1), nn.Fold((8, 8), 3, padding=1)
        self.mix = nn.Linear(9, 9)
        self.shuffle = nn.PixelShuffle(2)

    def forward(self, x):
        theta = self.theta(x.mean((2, 3)).repeat(1, 2)).view(-1, 2, 3) * 0.1 + torch.eye(2, 3)
        warped = F.grid_sample(x, F.affine_grid(theta, list(x.shape), align_corners=False), align_corners=False,
                               padding_mode="reflection")  # fmt: skip
        patches = self.unfold(warped).unflatten(1, (3, 9))
        folded = self.fold(self.mix(patches.transpose(2, 3)).transpose(2, 3).flatten(1, 2))
        small = F.interpolate(folded, size=(4, 4), mode="area")
        big = F.interpolate(small, scale_factor=2, mode="bicubic", align_corners=True)
        exact = F.interpolate(x, size=(5, 5), mode="nearest-exact")
        return self.shuffle(torch.cat([big, folded, warped, x], 1)), exact


def resampling_ops():
    return _w("resampling_ops", Resamples().eval(), samples=[((_x(2, 3, 8, 8),), {})], description="F.grid_sample "
              "with reflection padding on an affine grid, nn.Unfold/nn.Fold around a Linear, F.interpolate in "
              "area, bicubic and nearest-exact modes, nn.PixelShuffle", modules={"grid_sample": {""}, "unfold":
              {"unfold"}, "fold": {"fold"}, "interpolate": {""}, "pixel_shuffle": {"shuffle"}},
              calls={"interpolate": 3, "grid_sample": 1})  # fmt: skip


class RoutesByDistance(nn.Module):
    def __init__(self, d: int = 16, centroids: int = 6):
        super().__init__()
        self.centroids = nn.Parameter(torch.randn(centroids, d))
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        dist = torch.cdist(self.proj(x), self.centroids)
        near, idx = torch.topk(dist, 2, largest=False)
        ordered, order = torch.sort(idx[:, 0], stable=True)
        used, inverse, counts = torch.unique(ordered, return_inverse=True, return_counts=True)
        load = torch.bincount(idx[:, 0], minlength=self.centroids.shape[0])
        slots = torch.searchsorted(torch.cumsum(load, 0), order, right=True)
        pooled = torch.zeros(self.centroids.shape).scatter_reduce(0, idx[:, :1].expand(-1, x.shape[1]), x, "amax")
        return near, used, inverse, counts, slots, pooled


def distance_routing():
    return _w("distance_routing", RoutesByDistance().eval(), samples=[((_x(12, 16),), {})], description="routing "
              "by torch.cdist, topk (smallest), a stable sort, unique with inverse and counts, bincount, searchsorted, "
              "scatter_reduce amax", modules={"torch.cdist": {""}, "torch.unique": {""}, "torch.topk": {""},
              "Tensor.scatter_reduce": {""}}, calls={"torch.cdist": 1, "torch.unique": 1})  # fmt: skip


class RobustStats(nn.Module):
    def forward(self, x):
        x = x.masked_fill(x > 1.5, float("nan"))
        q = torch.quantile(torch.nan_to_num(x), torch.tensor([0.1, 0.5, 0.9]), dim=1, interpolation="midpoint")
        med, where = torch.nanmedian(x, dim=1)
        kth = torch.kthvalue(torch.nan_to_num(x, 0.0), 3, dim=1).values
        mode = torch.mode((torch.nan_to_num(x) * 2).round(), dim=1).values
        hist = torch.histc(torch.nan_to_num(x), bins=5, min=-2, max=2)
        return q, med, where, torch.nanmean(x, 1), torch.nansum(x, 1), kth, mode, hist


def quantiles_nan():
    return _w("quantiles_nan", RobustStats().eval(), samples=[((_x(4, 11),), {})], description="quantile with "
              "midpoint interpolation, nanmedian, nanmean, nansum, kthvalue, mode, histc over a tensor with NaNs",
              modules={"torch.quantile": {""}, "torch.nanmedian": {""}}, calls={"torch.quantile": 1,
              "torch.nan_to_num": 4})  # fmt: skip


class Solves(nn.Module):
    def __init__(self, n: int = 5):
        super().__init__()
        self.proj = nn.Linear(n, n)

    def forward(self, a, b):
        spd = a @ a.transpose(-1, -2) + torch.eye(a.shape[-1])
        lu, pivots = torch.linalg.lu_factor(spd)
        x1 = torch.linalg.lu_solve(lu, pivots, b)
        chol = torch.linalg.cholesky(spd)
        x2 = torch.linalg.solve_triangular(chol, b, upper=False)
        x3 = torch.linalg.solve(self.proj(a) + 3 * torch.eye(a.shape[-1]), b)  # (lstsq's gelsy varies run to run)
        sign, logdet = torch.linalg.slogdet(spd)
        return x1, x2, x3, sign * logdet, torch.linalg.matrix_exp(0.1 * a)


def linalg_solves():
    return _w("linalg_solves", Solves().eval(), samples=[((_x(2, 5, 5), _x(2, 5, 3)), {})], description="LU factor "
              "and solve, a Cholesky factor and a triangular solve, a solve of a Linear's output, slogdet, "
              "matrix_exp", modules={"torch.linalg.lu_factor": {""}, "torch.linalg.solve": {""}, "linear": {"proj"}},
              calls={"torch.linalg.lu_solve": 1, "torch.linalg.solve_triangular": 1})  # fmt: skip


class Gcn(nn.Module):
    def __init__(self, d: int = 8):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(2))

    def forward(self, x, edges):
        n = x.shape[0]
        values = torch.ones(edges.shape[1])
        adj = torch.sparse_coo_tensor(edges, values, (n, n)).coalesce() + torch.eye(n).to_sparse()
        degree = torch.sparse.sum(adj, dim=1).to_dense()
        norm = degree.pow(-0.5)
        adj = torch.sparse_coo_tensor(adj.indices(), adj.values() * norm[adj.indices()[0]] * norm[adj.indices()[1]],
                                      (n, n))  # fmt: skip
        for layer in self.layers:
            x = F.relu(torch.sparse.mm(adj, layer(x)))
        return adj.to_sparse_csr() @ x


def sparse_gcn():
    edges = torch.tensor([[0, 1, 2, 3, 4, 5, 1], [1, 2, 3, 4, 5, 0, 4]])
    return _w("sparse_gcn", Gcn().eval(), samples=[((_x(6, 8), edges), {})], description="a GCN whose normalized "
              "sparse adjacency is built in its forward (sparse_coo_tensor, coalesce, torch.sparse.sum), "
              "torch.sparse.mm per layer, a CSR matmul at the end", modules={"torch.sparse.mm": {""}, "relu": {""},
              "linear": {"layers.0", "layers.1"}}, calls={"torch.sparse.mm": 2, "relu": 2})  # fmt: skip


class NumpyDetour(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Mlp(), Mlp()

    def forward(self, x):
        h = self.a(x)
        array = h.cpu().numpy()  # leaves torch mid-forward
        ranks = array.argsort(axis=1).argsort(axis=1).astype("float32") / array.shape[1]
        back = torch.from_numpy(ranks)
        return self.b(h + back), float(h.detach().sum())


def numpy_roundtrip():
    return _w("numpy_roundtrip", NumpyDetour().eval(), description="a forward that goes to NumPy (.cpu().numpy(), "
              "argsort there) and back with torch.from_numpy", modules={"gelu": {"a", "b"}, "Tensor.__add__":
              {"", "a", "b"}}, calls={"gelu": 2})  # fmt: skip


class AutocastForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.out = nn.Linear(16, 16), nn.Linear(16, 4)

    @torch.autocast("cpu", dtype=torch.bfloat16)
    def forward(self, x):
        h = F.gelu(self.fc(x))
        with torch.autocast("cpu", enabled=False):
            h = F.layer_norm(h.float(), (16,))
        return self.out(h).float()


def autocast_decorated():
    return _w("autocast_decorated", AutocastForward().eval(), description="@torch.autocast('cpu', bfloat16) as a "
              "decorator on forward, an autocast(enabled=False) block inside", modules={"linear": {"fc", "out"},
              "layer_norm": {""}, "gelu": {""}}, calls={"linear": 2})  # fmt: skip


def batch_sizes():
    samples = [((_x(1, 16),), {}), ((_x(3, 16),), {}), ((_x(7, 16),), {}), ((_x(3, 16),), {})]
    from sweep_cpu_mechanisms import Net

    return _w("batch_sizes", Net().eval(), samples=samples, description="samples of batch sizes 1, 3, 7 and 3 "
              "again: distinct signatures per size", modules={"gelu": {"a", "b"}}, calls={"gelu": 8,
              "torch.relu": 4})  # fmt: skip


UNSEEN8_MORE_MECHANISMS = {
    "distribution_mixtures": distribution_mixtures, "packed_bidirectional": packed_bidirectional,
    "transformer_encoder_decoder": transformer_encoder_decoder, "mha_weights_padding": mha_weights_padding,
    "resampling_ops": resampling_ops, "distance_routing": distance_routing, "quantiles_nan": quantiles_nan,
    "linalg_solves": linalg_solves, "sparse_gcn": sparse_gcn, "numpy_roundtrip": numpy_roundtrip,
    "autocast_decorated": autocast_decorated, "batch_sizes": batch_sizes,
}  # fmt: skip
