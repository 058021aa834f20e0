"""The demo model: small enough for a laptop CPU, varied enough to show nested functionals."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn


class ConvBlock(nn.Module):
    """conv2d -> group_norm -> silu, the UNet-style block."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.norm = nn.GroupNorm(4, channels)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return F.silu(self.norm(self.conv(image)))


class DemoModel(nn.Module):
    """An MLP (Linear/ReLU), a TransformerEncoderLayer on its slow path (batch_first=False, so
    F.multi_head_attention_forward nests F.linear and F.scaled_dot_product_attention), and a conv block."""

    def __init__(self, width: int = 64, heads: int = 4):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.ReLU(), nn.Linear(4 * width, width))
        self.encoder = nn.TransformerEncoderLayer(width, heads, dim_feedforward=2 * width, dropout=0.0)
        self.conv = ConvBlock()
        self.head = nn.Linear(width + 8, 10)

    def forward(self, tokens: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        x = self.encoder(self.mlp(tokens))  # (seq, batch, width)
        pooled = x.mean(dim=0)
        features = self.conv(image).mean(dim=(2, 3))
        return F.softmax(self.head(torch.cat([pooled, features], dim=1)), dim=-1)


def demo_workload(device: str = "cpu", dtype: torch.dtype = torch.float32):
    """(model, samples): two input shapes, so function_data shows two signatures per call."""
    torch.manual_seed(0)
    model = DemoModel().to(device=device, dtype=dtype).eval()
    samples = []
    for seq, batch in ((16, 4), (8, 4)):
        tokens = torch.randn(seq, batch, 64, device=device, dtype=dtype)
        image = torch.randn(batch, 3, 16, 16, device=device, dtype=dtype)
        samples.append(((tokens, image), {}))
    return model, samples
