"""Programs for cpu_sweep.py around what a forward computes that the other sweep files leave out: eager QAT
(fused conv-bn-relu with fake quantization), ``mode="reduce-overhead"`` on the CPU, a submodule compiled with
``fullgraph``, strided nested tensors, sparse CSR, complex-valued layers, ``torch.linalg``, ``torch.special``,
``torch.fft`` with ``stft``/``istft``, ``torch.distributions`` and a seeded ``fork_rng``, ``einsum`` rearranges,
image resampling ops, losses computed in the forward, ``_foreach`` ops, ``nn.MultiheadAttention`` (its fast path
and its weights), embedding bags and ``max_norm``, and RNN cells stepped in Python.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, Net, _w, _x
from torch import nn

# --- quantization-aware training and compile modes ------------------------------------------------------------------


class ConvBnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant, self.dequant = torch.ao.quantization.QuantStub(), torch.ao.quantization.DeQuantStub()
        self.conv, self.bn, self.relu = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = self.relu(self.bn(self.conv(self.quant(x))))
        return self.dequant(self.fc(y.mean((2, 3))))


def qat_eager():
    model = ConvBnRelu().train()
    model.qconfig = torch.ao.quantization.get_default_qat_qconfig("x86")
    fused = torch.ao.quantization.fuse_modules_qat(model, [["conv", "bn", "relu"]])
    prepared = torch.ao.quantization.prepare_qat(fused)
    with torch.no_grad():
        prepared(torch.randn(2, 3, 8, 8))  # observers see one batch, then are frozen
    prepared.apply(torch.ao.quantization.disable_observer)
    prepared.apply(torch.nn.intrinsic.qat.freeze_bn_stats)
    model = prepared.eval()
    return _w("qat_eager", model, samples=[((torch.randn(2, 3, 8, 8),), {})], description="eager QAT: "
              "fuse_modules_qat (conv-bn-relu), prepare_qat, observers disabled, fake quantization on",
              modules={"conv2d": {"conv"}, "linear": {"fc"}})  # fmt: skip


def compile_reduce_overhead():
    model = torch.compile(Net().eval(), mode="reduce-overhead")
    return _w("compile_reduce_overhead", model, description='torch.compile(mode="reduce-overhead") on the CPU '
              "(no CUDA graphs to take)")  # fmt: skip


def compile_submodule_fullgraph():
    model = Net().eval()
    model.b = torch.compile(model.b, fullgraph=True, dynamic=False)
    samples = [((_x(3, 16),), {}), ((_x(5, 16),), {})]
    return _w("compile_submodule_fullgraph", model, samples=samples, description="a submodule compiled with "
              "inductor, fullgraph=True, dynamic=False, two batch sizes", modules={"gelu": {"a"}})  # fmt: skip


# --- layouts and dtypes -------------------------------------------------------------------------------------------


class NestedStrided(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.out = nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, parts):
        nested = torch.nested.nested_tensor(parts)
        y = F.gelu(self.fc(nested))
        y = torch.nested.to_padded_tensor(y, 0.0)
        return self.out(y).softmax(-1)


def nested_strided():
    parts = [torch.randn(n, 16) for n in (2, 5, 3)]
    return _w("nested_strided", NestedStrided().eval(), samples=[((parts,), {})], description="a strided nested "
              "tensor through Linear and gelu, to_padded_tensor", modules={"gelu": {""}})  # fmt: skip


class SparseCsr(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, adjacency, x):
        csr = adjacency.to_sparse_csr()
        h = torch.sparse.mm(csr, self.fc(x))
        h = torch.sparse.addmm(h, adjacency.to_sparse(), x)
        return F.elu(h) + (csr @ x)


def sparse_csr():
    adjacency = (torch.rand(8, 8) > 0.7).float()
    return _w("sparse_csr", SparseCsr().eval(), samples=[((adjacency, _x(8, 16)), {})], description="sparse CSR: "
              "to_sparse_csr, torch.sparse.mm, torch.sparse.addmm of COO, CSR @ dense",
              modules={"elu": {""}, "linear": {"fc"}})  # fmt: skip


class ComplexLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 16, dtype=torch.complex64) / 4)
        self.gain = nn.Linear(16, 16)

    def forward(self, x):
        z = torch.polar(x.abs() + 1, x)
        z = F.linear(z, self.weight)
        z = z * torch.exp(1j * torch.angle(z))
        return self.gain(torch.view_as_real(z).sum(-1)) + z.abs()


def complex_network():
    return _w("complex_network", ComplexLayer().eval(), description="a complex64 weight through F.linear, "
              "torch.polar, angle, exp, view_as_real", modules={"linear": {"", "gain"}})  # fmt: skip


# --- numerics namespaces -------------------------------------------------------------------------------------------


class LinalgCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        a = self.fc(x)[:4, :4]
        spd = a @ a.mT + 4 * torch.eye(4)
        q, r = torch.linalg.qr(a)
        chol = torch.linalg.cholesky(spd)
        solved = torch.linalg.solve(spd, a)
        values = torch.linalg.eigvalsh(spd)
        return (
            (q @ r + chol + solved + torch.linalg.inv(spd) + torch.linalg.matrix_exp(a / 8)).sum()
            + values.sum()
            + torch.linalg.det(spd)
            + torch.linalg.vector_norm(a)
            + torch.linalg.svdvals(a).sum()
        )


def linalg_calls():
    expected = {f"torch.linalg.{name}": {""} for name in ("qr", "cholesky", "solve", "eigvalsh", "inv", "matrix_exp",
                                                          "det", "vector_norm", "svdvals")}  # fmt: skip
    return _w("linalg_calls", LinalgCalls().eval(), description="torch.linalg: qr, cholesky, solve, eigvalsh, inv, "
              "matrix_exp, det, vector_norm, svdvals", modules=expected)  # fmt: skip


class SpecialCalls(nn.Module):
    def forward(self, x):
        p = torch.sigmoid(x)
        return (torch.special.erf(x) + torch.special.gammaln(x.abs() + 1) + torch.special.logit(p, eps=1e-6)
                + torch.special.i0(x) + torch.special.xlog1py(p, x.abs()) + torch.special.bessel_j0(x)
                + torch.special.entr(p) + torch.special.log_ndtr(x))  # fmt: skip


def special_calls():
    names = ("erf", "gammaln", "logit", "i0", "xlog1py", "bessel_j0", "entr", "log_ndtr")
    return _w("special_calls", SpecialCalls().eval(), description="torch.special: erf, gammaln, logit, i0, "
              "xlog1py, bessel_j0, entr, log_ndtr", modules={f"torch.special.{n}": {""} for n in names})  # fmt: skip


class Spectral(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(32))
        self.fc = nn.Linear(17, 17)

    def forward(self, wave):
        spec = torch.stft(wave, 32, hop_length=8, window=self.window, return_complex=True)
        mag = self.fc(spec.abs().mT).mT
        back = torch.istft(torch.polar(mag, spec.angle()), 32, hop_length=8, window=self.window, length=wave.shape[-1])
        image = torch.fft.rfft2(back.view(2, 16, 16))
        return torch.fft.fftshift(torch.fft.irfft2(image, s=(16, 16))), torch.fft.hfft(spec[..., :4])


def fft_spectral():
    return _w("fft_spectral", Spectral().eval(), samples=[((torch.randn(2, 256),), {})], description="stft, a "
              "Linear on magnitudes, istft, rfft2, irfft2, fftshift, hfft",
              modules={"torch.stft": {""}, "torch.fft.rfft2": {""}, "linear": {"fc"}})  # fmt: skip


class Distributions(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean, self.scale = nn.Linear(16, 4), nn.Linear(16, 4)

    def forward(self, x):
        from torch import distributions as D  # noqa: N812

        normal = D.Normal(self.mean(x), F.softplus(self.scale(x)) + 1e-3)
        prior = D.Normal(torch.zeros(4), torch.ones(4))
        categorical = D.Categorical(logits=self.mean(x))
        with torch.random.fork_rng():
            torch.manual_seed(0)
            sample = normal.rsample()
            picks = categorical.sample((3,))
        return (
            normal.log_prob(sample).sum()
            + D.kl_divergence(normal, prior).sum()
            + categorical.entropy().sum()
            + categorical.log_prob(picks).sum()
            + normal.cdf(sample).sum()
        )


def distributions_inside():
    return _w("distributions_inside", Distributions().eval(), description="torch.distributions Normal and "
              "Categorical: rsample and sample under a seeded fork_rng, log_prob, kl_divergence, entropy, cdf",
              modules={"softplus": {""}, "linear": {"mean", "scale"}}, calls={"linear": 3})  # fmt: skip


class Rearranges(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.bilinear = nn.Linear(16, 48), nn.Bilinear(16, 16, 8)
        self.unflatten = nn.Unflatten(-1, (4, 4))

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, 2, 8).permute(2, 0, 3, 1, 4)
        weights = torch.einsum("bhqd,bhkd->bhqk", q, k).softmax(-1)
        y = torch.einsum("bhqk,bhkd->bqhd", weights, v).flatten(2)
        y = torch.einsum("...i,...i->...", y, y)[..., None] * y
        outer = torch.tensordot(y, y, dims=([0, 1], [0, 1]))
        return self.bilinear(y, y), self.unflatten(y), torch.kron(outer[:2, :2], torch.eye(2))


def einsum_rearranges():
    return _w("einsum_rearranges", Rearranges().eval(), samples=[((_x(2, 5, 16),), {})], description="einsum "
              "attention and ellipsis, tensordot, kron, Bilinear, Unflatten", modules={"torch.einsum": {""},
              "bilinear": {"bilinear"}}, calls={"torch.einsum": 3})  # fmt: skip


class Resampling(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 4, 2, stride=2)
        self.conv3d = nn.Conv3d(1, 2, 3, padding=1).to(memory_format=torch.channels_last_3d)
        self.shuffle = nn.PixelShuffle(2)

    def forward(self, image):
        theta = torch.tensor([[[0.9, 0.1, 0.0], [-0.1, 0.9, 0.0]]]).expand(image.shape[0], 2, 3)
        grid = F.affine_grid(theta, list(image.shape), align_corners=False)
        warped = F.grid_sample(image, grid, align_corners=False)
        small = F.interpolate(warped, scale_factor=0.5, mode="bilinear", antialias=True)
        big = self.shuffle(self.up(small))
        patches = F.unfold(big, 2, stride=2)
        folded = F.fold(patches, big.shape[-2:], 2, stride=2)
        volume = self.conv3d(folded[:, :1, None].contiguous(memory_format=torch.channels_last_3d))
        return folded, volume


def vision_ops():
    return _w("vision_ops", Resampling().eval(), samples=[((torch.randn(2, 4, 8, 8),), {})], description="affine_grid, "
              "grid_sample, antialiased interpolate, ConvTranspose2d, PixelShuffle, unfold/fold, channels_last_3d "
              "Conv3d", modules={"grid_sample": {""}, "interpolate": {""}, "pixel_shuffle": {"shuffle"},
              "unfold": {""}, "fold": {""}})  # fmt: skip


class WithLosses(nn.Module):
    def __init__(self):
        super().__init__()
        self.head, self.ctc = nn.Linear(16, 5), nn.Linear(16, 6)

    def forward(self, x, labels, frames, targets):
        logits = self.head(x)
        log_probs = F.log_softmax(self.ctc(frames), -1)
        lengths = torch.full((frames.shape[1],), frames.shape[0], dtype=torch.long)
        return (F.cross_entropy(logits, labels, label_smoothing=0.1) + F.nll_loss(logits.log_softmax(-1), labels,
                ignore_index=0) + F.kl_div(log_probs[0], log_probs[1], log_target=True, reduction="batchmean")
                + F.binary_cross_entropy_with_logits(logits, torch.sigmoid(logits)) + F.ctc_loss(log_probs, targets,
                lengths, torch.full_like(lengths, 3)) + F.triplet_margin_loss(x, x.flip(0), x.roll(1, 0)))  # fmt: skip


def losses_inside():
    sample = ((_x(), torch.tensor([1, 0, 3, 4]), torch.randn(7, 2, 16), torch.randint(1, 6, (2, 3))), {})
    names = ("cross_entropy", "nll_loss", "kl_div", "binary_cross_entropy_with_logits", "ctc_loss",
             "triplet_margin_loss")  # fmt: skip
    return _w("losses_inside", WithLosses().eval(), samples=[sample], description="a model returning its losses: "
              "cross_entropy with label smoothing, nll_loss with ignore_index, kl_div, BCE with logits, ctc_loss, "
              "triplet_margin_loss", modules={n: {""} for n in names}, calls={n: 1 for n in names})  # fmt: skip


class Foreach(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x):
        params = [p.detach() for p in self.mlp.parameters()]
        shifted = torch._foreach_add(params, 0.1)
        scaled = torch._foreach_mul(shifted, 0.5)
        norms = torch._foreach_norm(scaled)
        return self.mlp(x) * torch.stack(norms).sum()


def foreach_ops():
    return _w("foreach_ops", Foreach().eval(), description="torch._foreach_add, _foreach_mul, _foreach_norm over a "
              "module's parameters (private torch functions: named after their operators)",
              modules={"aten::_foreach_add": {""}, "aten::_foreach_norm": {""},
              "gelu": {"mlp"}})  # fmt: skip


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.fast = nn.MultiheadAttention(16, 4, batch_first=True)
        self.weighted = nn.MultiheadAttention(16, 2, kdim=8, vdim=12, batch_first=False)

    def forward(self, x, memory, values, padding):
        fast, _ = self.fast(x, x, x, key_padding_mask=padding, need_weights=False)
        out, weights = self.weighted(fast.transpose(0, 1), memory, values, average_attn_weights=False)
        return out, weights


def multihead_attention():
    padding = torch.tensor([[False] * 5 + [True], [False] * 6])
    sample = ((_x(2, 6, 16), torch.randn(3, 2, 8), torch.randn(3, 2, 12), padding), {})
    return _w("multihead_attention", Attention().eval(), samples=[sample], description="nn.MultiheadAttention: the "
              "batch-first fast path with a padding mask, separate key/value sizes with per-head weights",
              modules={"multi_head_attention_forward": {"weighted"}})  # fmt: skip


class Bags(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(30, 16, mode="sum")
        self.mean_bag = nn.EmbeddingBag(30, 16, mode="max", padding_idx=0)
        self.clipped = nn.Embedding(30, 16, max_norm=1.0)

    def forward(self, ids, offsets, weights):
        summed = self.bag(ids, offsets, per_sample_weights=weights)
        return summed + self.mean_bag(ids.view(2, -1)) + self.clipped(ids.view(2, -1)).sum(1)


def embedding_bags():
    ids = torch.randint(0, 30, (8,))
    sample = ((ids, torch.tensor([0, 4]), torch.rand(8)), {})
    return _w("embedding_bags", Bags().eval(), samples=[sample], description="EmbeddingBag with offsets and "
              "per-sample weights, max with padding_idx; Embedding with max_norm (renormalized in place)",
              modules={"embedding_bag": {"bag", "mean_bag"}, "embedding": {"clipped"}})  # fmt: skip


class Cells(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm, self.gru, self.rnn = nn.LSTMCell(16, 16), nn.GRUCell(16, 16), nn.RNNCell(16, 16, "relu")
        self.deep = nn.LSTM(16, 8, num_layers=2, bidirectional=True, proj_size=4, batch_first=True)

    def forward(self, seq):
        h = c = g = r = torch.zeros(seq.shape[0], 16)
        for t in range(seq.shape[1]):
            h, c = self.lstm(seq[:, t], (h, c))
            g = self.gru(h, g)
            r = self.rnn(g, r)
        out, _ = self.deep(seq)
        return r, out


def rnn_cells():
    return _w("rnn_cells", Cells().eval(), samples=[((_x(2, 4, 16),), {})], description="LSTMCell, GRUCell, RNNCell "
              "stepped in Python; a two-layer bidirectional LSTM with proj_size", calls={})  # fmt: skip


UNSEEN5_OP_MECHANISMS = {f.__name__: f for f in (
    qat_eager, compile_reduce_overhead, compile_submodule_fullgraph, nested_strided, sparse_csr, complex_network,
    linalg_calls, special_calls, fft_spectral, distributions_inside, einsum_rearranges, vision_ops, losses_inside,
    foreach_ops, multihead_attention, embedding_bags, rnn_cells,
)}  # fmt: skip
