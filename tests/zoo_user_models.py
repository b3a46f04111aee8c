"""User modules for tests/test_zoo.py, referenced by dotted path like a user's own package."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class TinyCNN(nn.Module):
    """Stem, depthwise, channel-multiplier conv, 2×2 up-convolution, 1-d conv, classifier."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, stride=2, padding=1)
        self.depthwise = nn.Conv2d(width, width, 3, padding=1, groups=width)
        self.multiplier = nn.Conv2d(width, 2 * width, 3, padding=1, groups=width)
        self.up = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.temporal = nn.Conv1d(width, width, 5)
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.up(self.multiplier(self.depthwise(self.stem(x))))
        x = self.temporal(x.flatten(2)).mean(-1)
        return self.head(x)


class FunctionalAttention(nn.Module):
    """Attention written inline: a Parameter projection, two bare matmuls, then SDPA."""

    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.proj = nn.Parameter(torch.empty(dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        h = (x @ self.proj).view(batch, tokens, self.heads, -1).transpose(1, 2)
        mixed = (h @ h.transpose(-2, -1)).softmax(-1) @ h
        return F.scaled_dot_product_attention(mixed, mixed, mixed)


class TorchMultiheadAttention(nn.Module):
    """nn.MultiheadAttention hides its matmuls in a composite the extractor must refuse."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, x, x, need_weights=False)[0]


class HugeLinear(nn.Module):
    """4 × 10¹⁰ bytes of float32 weights: only traceable if nothing is allocated."""

    def __init__(self, features: int = 100_000):
        super().__init__()
        self.fc = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def not_a_module(**_kwargs: object) -> int:
    return 42
