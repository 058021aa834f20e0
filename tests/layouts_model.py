"""A tiny model for the bench tests: its calls get inputs of every layout a replay must rebuild."""

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn


class LayoutsModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 32))
        self.bias = nn.Parameter(torch.randn(8))

    def forward(self, x):
        sliced = F.gelu(x[:, :8])  # a quarter of x's storage: samples.pt stores it as a dense copy
        transposed = F.relu(x.t())  # dense, permuted strides
        expanded = F.silu(self.bias.expand(x.shape[0], 8))  # stride 0
        product = torch.addmm(self.bias, x, self.weight.t())
        large = F.softplus(x.repeat(64, 8))  # 0.5-1 MiB: past a 0.5 MiB sample memory cap
        return sliced + expanded + product, transposed, large.sum()
