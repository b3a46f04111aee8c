"""Transformers: BERT-base encoder, GPT-2 small (prompt processing) and ViT-B/16.

Attention is written with explicit matmuls, each in its own `MatMul` module (`attn.qk`, `attn.av`),
so the layer table lists Q·Kᵀ and attention·V of every block, with all heads of the batch as
`groups`. All three share one block; they differ in normalisation placement (BERT post-norm,
GPT-2 and ViT pre-norm), masking (GPT-2 causal) and Q/K/V projections (BERT separate, the others
fused).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class MatMul(nn.Module):
    """`a @ b` as a module, so each attention matmul gets its own name in the layer table."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


class SelfAttention(nn.Module):
    """Multi-head self-attention with per-head Q·Kᵀ and attention·V matmuls."""

    def __init__(self, dim: int, heads: int, fused_qkv: bool, causal: bool):
        super().__init__()
        self.heads = heads
        self.causal = causal
        self.fused_qkv = fused_qkv
        if fused_qkv:
            self.qkv = nn.Linear(dim, 3 * dim)
        else:
            self.query = nn.Linear(dim, dim)
            self.key = nn.Linear(dim, dim)
            self.value = nn.Linear(dim, dim)
        self.qk = MatMul()
        self.av = MatMul()
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        if self.fused_qkv:
            q, k, v = self.qkv(x).split(dim, dim=-1)
        else:
            q, k, v = self.query(x), self.key(x), self.value(x)
        q, k, v = (t.view(batch, tokens, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        scores = self.qk(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if self.causal:
            future = torch.ones(tokens, tokens, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        context = self.av(scores.softmax(dim=-1), v)
        return self.out(context.transpose(1, 2).reshape(batch, tokens, dim))


class FeedForward(nn.Sequential):
    """Position-wise MLP: dim → hidden (GELU) → dim."""

    def __init__(self, dim: int, hidden: int):
        super().__init__(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))


class Block(nn.Module):
    """Transformer block: attention and MLP with residuals, LayerNorm before or after each."""

    def __init__(
        self, dim: int, heads: int, hidden: int, pre_norm: bool, fused_qkv: bool, causal: bool
    ):
        super().__init__()
        self.pre_norm = pre_norm
        self.attn = SelfAttention(dim, heads, fused_qkv, causal)
        self.norm1 = nn.LayerNorm(dim)
        self.mlp = FeedForward(dim, hidden)
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.mlp(x))


def _blocks(
    depth: int, dim: int, heads: int, hidden: int, *, pre_norm: bool, fused_qkv: bool, causal: bool
) -> nn.ModuleList:
    return nn.ModuleList(
        Block(dim, heads, hidden, pre_norm, fused_qkv, causal) for _ in range(depth)
    )


class BertEncoder(nn.Module):
    """BERT-base (Devlin et al. 2019): embeddings + 12 post-norm blocks, d=768, 12 heads, ff 3072.

    The encoder only: no pooler and no task head. Input: token ids (batch, seq_len ≤ 512).
    """

    def __init__(
        self,
        vocab: int = 30522,
        max_positions: int = 512,
        dim: int = 768,
        depth: int = 12,
        heads: int = 12,
        hidden: int = 3072,
    ):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, dim)
        self.position_embeddings = nn.Embedding(max_positions, dim)
        self.token_type_embeddings = nn.Embedding(2, dim)
        self.embedding_norm = nn.LayerNorm(dim)
        self.layers = _blocks(
            depth, dim, heads, hidden, pre_norm=False, fused_qkv=False, causal=False
        )

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.word_embeddings(ids) + self.position_embeddings(positions)
        x = self.embedding_norm(x + self.token_type_embeddings(torch.zeros_like(ids)))
        for layer in self.layers:
            x = layer(x)
        return x


class GPT2(nn.Module):
    """GPT-2 small (Radford et al. 2019): 12 pre-norm causal blocks, d=768, 12 heads, ff 3072.

    Prompt processing without a KV cache: the whole prompt (batch, seq_len ≤ 1024) goes through the
    blocks; the LM head (tied to the token embedding) runs on the last position only, since only
    the next token's logits are needed to start generating.
    """

    def __init__(
        self,
        vocab: int = 50257,
        max_positions: int = 1024,
        dim: int = 768,
        depth: int = 12,
        heads: int = 12,
        hidden: int = 3072,
    ):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(max_positions, dim)
        self.h = _blocks(depth, dim, heads, hidden, pre_norm=True, fused_qkv=True, causal=True)
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x[:, -1:, :]))


class VisionTransformer(nn.Module):
    """ViT-B/16 (Dosovitskiy et al. 2021): 16×16 patches + class token, 12 pre-norm blocks, d=768.

    The classifier reads the class token; (image_size/16)² + 1 tokens (197 at 224×224).
    """

    def __init__(
        self,
        image_size: int = 224,
        patch: int = 16,
        dim: int = 768,
        depth: int = 12,
        heads: int = 12,
        hidden: int = 3072,
        num_classes: int = 1000,
    ):
        super().__init__()
        tokens = (image_size // patch) ** 2 + 1
        self.conv_proj = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embedding = nn.Parameter(torch.zeros(1, tokens, dim))
        self.layers = _blocks(
            depth, dim, heads, hidden, pre_norm=True, fused_qkv=True, causal=False
        )
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        patches = self.conv_proj(images).flatten(2).transpose(1, 2)
        cls = self.class_token.expand(patches.shape[0], -1, -1)
        x = torch.cat([cls, patches], dim=1) + self.pos_embedding
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln(x[:, 0]))
