"""Programs for cpu_sweep.py: whole model families written by hand from nn primitives, as research code writes them
and the other sweep files leave out: a diffusion UNet with sinusoidal timestep embeddings and cross-attention, a VAE
decoder sampling from a generator seeded in its forward, a Swin-like ViT (shifted windows with ``torch.roll``, patch
merging), RWKV's time-mix recurrence stepped in Python, a Mamba-like block with a parallel selective scan
(``logcumsumexp``), speculative decoding with a draft and a target model in one callable, a beam search of the user's
own, a KV cache held as a Python list mutated in place.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import _w, _x
from torch import nn


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, c: int, temb: int):
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(4, c), nn.Conv2d(c, c, 3, padding=1)
        self.temb = nn.Linear(temb, c)
        self.norm2, self.conv2 = nn.GroupNorm(4, c), nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x, t):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(F.silu(t))[:, :, None, None]
        return x + self.conv2(F.silu(self.norm2(h)))


class CrossAttention(nn.Module):
    def __init__(self, c: int, ctx: int, heads: int = 2):
        super().__init__()
        self.heads, self.norm = heads, nn.LayerNorm(c)
        self.q, self.k, self.v, self.out = nn.Linear(c, c), nn.Linear(ctx, c), nn.Linear(ctx, c), nn.Linear(c, c)

    def forward(self, x, context):
        b, c, h, w = x.shape
        tokens = self.norm(x.flatten(2).transpose(1, 2))
        q, k, v = self.q(tokens), self.k(context), self.v(context)
        q, k, v = (t.unflatten(-1, (self.heads, -1)).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
        return x + self.out(attended).transpose(1, 2).reshape(b, c, h, w)


class TinyUNet(nn.Module):
    def __init__(self, c: int = 8, temb: int = 16, ctx: int = 12):
        super().__init__()
        self.temb_dim = temb
        self.time = nn.Sequential(nn.Linear(temb, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.inp = nn.Conv2d(3, c, 3, padding=1)
        self.down = ResBlock(c, temb)
        self.downsample = nn.Conv2d(c, c, 3, stride=2, padding=1)
        self.mid, self.attn = ResBlock(c, temb), CrossAttention(c, ctx)
        self.up = ResBlock(2 * c, temb)
        self.out = nn.Conv2d(2 * c, 3, 3, padding=1)

    def forward(self, x, t, context):
        temb = self.time(timestep_embedding(t, self.temb_dim))
        h0 = self.down(self.inp(x), temb)
        h = self.attn(self.mid(self.downsample(h0), temb), context)
        h = F.interpolate(h, scale_factor=2.0, mode="nearest")
        return self.out(self.up(torch.cat([h, h0], dim=1), temb))


def diffusion_unet():
    samples = [((_x(2, 3, 8, 8), torch.tensor([10, 500]), _x(2, 5, 12)), {})]
    return _w("diffusion_unet", TinyUNet().eval(), samples=samples, description="a diffusion UNet by hand: sinusoidal "
              "timestep embeddings, GroupNorm/SiLU ResBlocks, cross-attention to a context through SDPA, "
              "F.interpolate up, a skip concatenation", modules={"group_norm": {f"{b}.norm{i}" for b in
              ("down", "mid", "up") for i in (1, 2)}, "scaled_dot_product_attention": {"attn"}, "interpolate": {""},
              "torch.sin": {""}, "conv2d": {"inp", "downsample", "out", *(f"{b}.conv{i}" for b in ("down", "mid",
              "up") for i in (1, 2))}}, calls={"group_norm": 6, "scaled_dot_product_attention": 1,
              "silu": 3 * 3 + 1})  # fmt: skip


class VaeDecoder(nn.Module):
    def __init__(self, latent: int = 4, c: int = 8):
        super().__init__()
        self.post_quant = nn.Conv2d(2 * latent, 2 * latent, 1)
        self.conv_in = nn.Conv2d(latent, c, 3, padding=1)
        self.block = ResBlock(c, 4)
        self.up = nn.ConvTranspose2d(c, c, 4, stride=2, padding=1)
        self.norm_out, self.conv_out = nn.GroupNorm(4, c), nn.Conv2d(c, 3, 3, padding=1)

    def forward(self, moments):
        mean, logvar = self.post_quant(moments).chunk(2, dim=1)
        generator = torch.Generator().manual_seed(1234)  # seeded per call: every pass samples the same latent
        z = mean + torch.exp(0.5 * logvar.clamp(-30, 20)) * torch.randn(mean.shape, generator=generator)
        h = self.block(self.conv_in(z), torch.zeros(z.shape[0], 4))
        return torch.tanh(self.conv_out(F.silu(self.norm_out(self.up(h)))))


def vae_decoder():
    return _w("vae_decoder", VaeDecoder().eval(), samples=[((_x(2, 8, 4, 4),), {})], description="a VAE decoder: "
              "a diagonal Gaussian sampled with a torch.Generator seeded in the forward, ConvTranspose2d up, "
              "GroupNorm", modules={"conv_transpose2d": {"up"}, "torch.randn": {""}, "group_norm": {"block.norm1",
              "block.norm2", "norm_out"}}, calls={"torch.randn": 1, "conv_transpose2d": 1})  # fmt: skip


def window_partition(x: torch.Tensor, w: int) -> torch.Tensor:
    b, h, wd, c = x.shape
    x = x.view(b, h // w, w, wd // w, w, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, w * w, c)


class WindowBlock(nn.Module):
    def __init__(self, c: int, window: int, shift: int, heads: int = 2):
        super().__init__()
        self.window, self.shift, self.heads = window, shift, heads
        self.norm1, self.qkv, self.proj = nn.LayerNorm(c), nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.norm2, self.mlp = nn.LayerNorm(c), nn.Sequential(nn.Linear(c, 2 * c), nn.GELU(), nn.Linear(2 * c, c))
        self.bias = nn.Parameter(torch.randn(heads, window * window, window * window) * 0.02)

    def forward(self, x):
        b, h, w, c = x.shape
        shifted = torch.roll(self.norm1(x), (-self.shift, -self.shift), dims=(1, 2)) if self.shift else self.norm1(x)
        windows = window_partition(shifted, self.window)
        q, k, v = self.qkv(windows).unflatten(-1, (3, self.heads, -1)).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5 + self.bias
        out = (scores.softmax(-1) @ v).transpose(1, 2).flatten(2)
        out = self.proj(out).view(b, h // self.window, w // self.window, self.window, self.window, c)
        out = out.permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        if self.shift:
            out = torch.roll(out, (self.shift, self.shift), dims=(1, 2))
        x = x + out
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.norm, self.reduction = nn.LayerNorm(4 * c), nn.Linear(4 * c, 2 * c, bias=False)

    def forward(self, x):
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], dim=-1)
        return self.reduction(self.norm(x))


class TinySwin(nn.Module):
    def __init__(self, c: int = 8):
        super().__init__()
        self.patch = nn.Conv2d(3, c, 2, stride=2)
        self.blocks = nn.ModuleList([WindowBlock(c, 2, 0), WindowBlock(c, 2, 1)])
        self.merge, self.head = PatchMerging(c), nn.Linear(2 * c, 5)

    def forward(self, x):
        x = self.patch(x).permute(0, 2, 3, 1)
        for block in self.blocks:
            x = block(x)
        return self.head(self.merge(x).mean(dim=(1, 2)))


def swin_by_hand():
    return _w("swin_by_hand", TinySwin().eval(), samples=[((_x(2, 3, 8, 8),), {})], description="a Swin-like ViT by "
              "hand: window partition by view/permute, shifted windows with torch.roll, a learned relative bias, "
              "patch merging of four strided slices", modules={"torch.roll": {"blocks.1"}, "Tensor.softmax":
              {"blocks.0", "blocks.1"}, "layer_norm": {"merge.norm", *(f"blocks.{b}.norm{i}" for b in (0, 1)
              for i in (1, 2))}, "torch.cat": {"merge"}},
              calls={"torch.roll": 2, "layer_norm": 5})  # fmt: skip


class RwkvTimeMix(nn.Module):
    def __init__(self, c: int = 16):
        super().__init__()
        self.mix_k, self.mix_v, self.mix_r = (nn.Parameter(torch.rand(c)) for _ in range(3))
        self.decay, self.first = nn.Parameter(-torch.rand(c)), nn.Parameter(torch.rand(c))
        self.key, self.value, self.receptance, self.output = (nn.Linear(c, c, bias=False) for _ in range(4))

    def forward(self, x):
        shifted = F.pad(x, (0, 0, 1, -1))  # the previous token (time shift)
        k = self.key(x * self.mix_k + shifted * (1 - self.mix_k))
        v = self.value(x * self.mix_v + shifted * (1 - self.mix_v))
        r = torch.sigmoid(self.receptance(x * self.mix_r + shifted * (1 - self.mix_r)))
        w = -torch.exp(self.decay)
        num = torch.zeros_like(x[:, 0])
        den = torch.zeros_like(x[:, 0])
        outs = []
        for t in range(x.shape[1]):  # the WKV recurrence, one step per token
            kt, vt = k[:, t], v[:, t]
            wkv = (num + torch.exp(self.first + kt) * vt) / (den + torch.exp(self.first + kt))
            outs.append(wkv)
            num = torch.exp(w) * num + torch.exp(kt) * vt
            den = torch.exp(w) * den + torch.exp(kt)
        return self.output(r * torch.stack(outs, dim=1))


def rwkv_time_mix():
    return _w("rwkv_time_mix", RwkvTimeMix().eval(), samples=[((_x(2, 6, 16) * 0.1,), {})], description="RWKV's "
              "time-mix: a time shift by F.pad with a negative pad, the WKV recurrence stepped token by token in "
              "Python", modules={"pad": {""}, "linear": {"key", "value", "receptance", "output"}, "torch.exp": {""},
              "torch.stack": {""}}, calls={"pad": 1, "torch.exp": 1 + 6 * 6, "torch.stack": 1})  # fmt: skip


class MambaLike(nn.Module):
    def __init__(self, c: int = 16, state: int = 4):
        super().__init__()
        self.in_proj, self.out_proj = nn.Linear(c, 2 * c), nn.Linear(c, c)
        self.conv = nn.Conv1d(c, c, 4, groups=c, padding=3)
        self.x_proj, self.dt_proj = nn.Linear(c, 1 + 2 * state), nn.Linear(1, c)
        self.a_log = nn.Parameter(torch.log(torch.arange(1, state + 1).float()).repeat(c, 1))
        self.state = state

    def forward(self, x):
        length = x.shape[1]
        u, gate = self.in_proj(x).chunk(2, dim=-1)
        u = F.silu(self.conv(u.transpose(1, 2))[..., :length].transpose(1, 2))  # causal depthwise conv
        dt, b, c = self.x_proj(u).split([1, self.state, self.state], dim=-1)
        dt = F.softplus(self.dt_proj(dt))  # (B, L, C)
        log_decay = -torch.exp(self.a_log)[None, None] * dt[..., None]  # (B, L, C, N)
        cum = torch.cumsum(log_decay, dim=1)
        inputs = (dt * u)[..., None] * b[:, :, None, :]
        # h_t = sum_s exp(cum_t - cum_s) * inputs_s, as a log-space parallel scan (inputs made positive + offset)
        shift = inputs.abs().amax() + 1
        acc = torch.logcumsumexp(torch.log(inputs + shift) - cum, dim=1) + cum
        base = torch.logcumsumexp(torch.log(torch.full_like(inputs, 1.0) * shift) - cum, dim=1) + cum
        h = torch.exp(acc) - torch.exp(base)
        y = (h * c[:, :, None, :]).sum(-1)
        return self.out_proj(y * F.silu(gate))


def mamba_parallel_scan():
    return _w("mamba_parallel_scan", MambaLike().eval(), samples=[((_x(2, 6, 16),), {})], description="a Mamba-like "
              "block: causal depthwise Conv1d, softplus step sizes, the selective scan in parallel form with cumsum "
              "and logcumsumexp", modules={"torch.logcumsumexp": {""}, "softplus": {""}, "conv1d": {"conv"},
              "torch.cumsum": {""}}, calls={"torch.logcumsumexp": 2, "silu": 2})  # fmt: skip


class TinyLm(nn.Module):
    def __init__(self, vocab: int = 32, d: int = 16, layers: int = 1):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, batch_first=True)
                                    for _ in range(layers))  # fmt: skip
        self.lm_head = nn.Linear(d, vocab)

    def forward(self, ids):
        h = self.embed(ids)
        mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
        for layer in self.layers:
            h = layer(h, src_mask=mask, is_causal=True)
        return self.lm_head(h)


def speculative_decoding():
    models = nn.ModuleDict({"draft": TinyLm(layers=1), "target": TinyLm(layers=2)}).eval()
    draft, target = models["draft"], models["target"]
    prompt = torch.tensor([[1, 5, 7, 2]])

    def speculate(ids, steps: int = 3, k: int = 3):
        for _ in range(steps):
            proposal = ids
            for _ in range(k):  # the draft proposes k tokens greedily
                proposal = torch.cat([proposal, draft(proposal)[:, -1:].argmax(-1)], dim=1)
            verified = target(proposal)[:, ids.shape[1] - 1 : -1].argmax(-1)  # the target scores them at once
            proposed = proposal[:, ids.shape[1] :]
            agree = int((verified == proposed).long().cumprod(-1).sum())
            ids = torch.cat([ids, proposed[:, :agree], verified[:, agree : agree + 1]], dim=1)
        return ids

    return _w("speculative_decoding", models, fn=speculate, samples=[((prompt,), {})], description="speculative "
              "decoding in one callable: a draft model proposes tokens one by one, a target verifies them in one "
              "call, acceptance by .item()-style int(); module = a ModuleDict of both", modules={"embedding":
              {"draft.embed", "target.embed"}, "linear": {"draft.lm_head", "target.lm_head"},
              "aten::_transformer_encoder_layer_fwd": {"draft.layers.0", "target.layers.0",
              "target.layers.1"}}, calls={"Tensor.argmax": 3 * 3 + 3})  # fmt: skip


def beam_search():
    model = TinyLm(layers=1).eval()
    prompt = torch.tensor([[3, 4, 5]])

    def search(ids, beams: int = 3, steps: int = 4):
        seqs, scores = ids.repeat(beams, 1), torch.tensor([0.0] + [-1e9] * (beams - 1))
        for _ in range(steps):
            logp = F.log_softmax(model(seqs)[:, -1], dim=-1)
            total = (scores[:, None] + logp).flatten()
            scores, flat = torch.topk(total, beams)
            parents, tokens = flat // logp.shape[-1], flat % logp.shape[-1]
            seqs = torch.cat([seqs.index_select(0, parents), tokens[:, None]], dim=1)
        return seqs, scores

    return _w("beam_search", model, fn=search, samples=[((prompt,), {})], description="a beam search of the user's "
              "own around a module: log_softmax, topk over beams x vocabulary, index_select of the surviving "
              "sequences (outside the module: no module)", modules={"log_softmax": {"<none>"}, "torch.topk":
              {"<none>"}, "linear": {"lm_head"}, "aten::_transformer_encoder_layer_fwd": {"layers.0"}},
              calls={"log_softmax": 4, "torch.topk": 4, "embedding": 4})  # fmt: skip


class CachedAttention(nn.Module):
    def __init__(self, d: int = 16):
        super().__init__()
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x, cache: list):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if cache:  # the list is the cache: its items are replaced in place
            cache[0] = torch.cat([cache[0], k], dim=1)
            cache[1] = torch.cat([cache[1], v], dim=1)
        else:
            cache.extend([k, v])
        return self.out(F.scaled_dot_product_attention(q[:, None], cache[0][:, None], cache[1][:, None])[:, 0])


class ListCacheDecoder(nn.Module):
    def __init__(self, d: int = 16, layers: int = 2):
        super().__init__()
        self.layers = nn.ModuleList(CachedAttention(d) for _ in range(layers))

    def forward(self, tokens):
        caches = [[] for _ in self.layers]  # a fresh cache per call: every pass decodes alike
        outs = []
        for t in range(tokens.shape[1]):
            h = tokens[:, t : t + 1]
            for layer, cache in zip(self.layers, caches, strict=True):
                h = h + layer(h, cache)
            outs.append(h)
        return torch.cat(outs, dim=1), [len(c) for c in caches]


def kv_cache_list():
    return _w("kv_cache_list", ListCacheDecoder().eval(), samples=[((_x(2, 5, 16),), {})], description="a KV cache "
              "held as a Python list, passed to every layer call and mutated in place (extend, item assignment), "
              "decoding token by token", modules={"scaled_dot_product_attention": {"layers.0", "layers.1"},
              "torch.cat": {"layers.0", "layers.1", ""}}, calls={"scaled_dot_product_attention": 10,
              "torch.cat": 2 * 4 * 2 + 1})  # fmt: skip


UNSEEN8_MECHANISMS = {
    "diffusion_unet": diffusion_unet, "vae_decoder": vae_decoder, "swin_by_hand": swin_by_hand,
    "rwkv_time_mix": rwkv_time_mix, "mamba_parallel_scan": mamba_parallel_scan,
    "speculative_decoding": speculative_decoding, "beam_search": beam_search, "kv_cache_list": kv_cache_list,
}  # fmt: skip
