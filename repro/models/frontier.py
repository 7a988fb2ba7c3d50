"""One backbone for the attentions of both papers (and others): the frontier study (docs/frontier.md).

Everything but the attention is shared: token and learned absolute position embeddings (absolute, because
every attention can use them: the adaptive span's relative embeddings need a band, the Sparse
Transformer's factorised row/column embeddings a stride; ``positions: factorized`` puts the latter in
their place, to show on the fixed pattern that the choice moves no result beyond seed noise), pre-norm
residual blocks

    H' = H + dropout(attention(norm(H)))
    H'' = H' + dropout(W2 f(W1 norm(H') + b1) + b2),  f(x) = x sigmoid(1.702 x)

(the Sparse Transformer's block and GELU approximation), a final norm and the output layer. Weights
N(0, init_std), W2 and the attention's output projection N(0, init_std / sqrt(2 N)), biases 0. The
attention of each layer is ``model.attention``, one file of :mod:`repro.models.attentions`; its penalty
(the span loss, eq. 6 of Sukhbaatar et al.) is added as ``span.loss_coef`` times the sum over layers.
Stateless across blocks, evaluated in overlapping windows like the Sparse Transformer.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from repro.config.families import FrontierConfig as Config
from repro.models import attentions
from repro.models.base import LanguageModel, ModelOutput, normal_init
from repro.models.span import span_statistics
from repro.models.sparse_transformer import gelu_sigmoid, row_column


class Block(nn.Module):
    def __init__(self, cfg: Config, layer: int):
        super().__init__()
        d, self.heads = cfg.d_model, cfg.heads
        if d % cfg.heads:
            raise ValueError(f"d_model={d} must be divisible by heads={cfg.heads}")
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.attn = attentions.build(cfg, layer)
        d_ff = int(round(d * cfg.ff_mult))
        self.w1, self.w2 = nn.Linear(d, d_ff), nn.Linear(d_ff, d)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        B, T, D = h.shape
        x = self.norm1(h)
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        o = self.attn(q, k, v, x).transpose(1, 2).reshape(B, T, D)
        h = h + self.drop(self.proj(o))
        return h + self.drop(self.w2(gelu_sigmoid(self.w1(self.norm2(h)))))


class Model(LanguageModel):
    def __init__(self, cfg: Config, vocab_size: int, block: int, shape: tuple[int, int, int] | None = None):
        super().__init__()
        self.cfg, self.vocab_size, self.block = cfg, vocab_size, block
        d = cfg.d_model
        self.tok = nn.Embedding(vocab_size + 1, d)  # + start token
        if cfg.positions == "absolute":
            self.pos = nn.Embedding(block, d)
        else:  # the Sparse Transformer's: row i // stride, column i mod stride
            self.rows, self.cols = nn.Embedding(math.ceil(block / cfg.stride), d), nn.Embedding(cfg.stride, d)
        self.blocks = nn.ModuleList([Block(cfg, i) for i in range(cfg.layers)])
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab_size)
        self.drop = nn.Dropout(cfg.dropout)
        normal_init(self, cfg.init_std, cfg.layers, [w for b in self.blocks for w in (b.w2, b.proj)])
        for b in self.blocks:  # an attention's own parameters keep their own initialisation
            if hasattr(b.attn, "reset_parameters"):
                b.attn.reset_parameters()

    def forward(self, x: torch.Tensor, state: Any = None) -> ModelOutput:
        h = self.drop(self.tok(x) + self.embed_positions(torch.arange(x.shape[1], device=x.device)))
        for blk in self.blocks:
            h = blk(h)
        penalties = [b.attn.loss for b in self.blocks if b.attn.loss is not None]
        aux = self.cfg.span.loss_coef * torch.stack(penalties).sum() if penalties else None
        return ModelOutput(logits=self.out(self.norm(h)), state=None, aux_loss=aux)

    def embed_positions(self, i: torch.Tensor) -> torch.Tensor:
        if self.cfg.positions == "absolute":
            return self.pos(i)
        row, col = row_column(i, self.cfg.stride, self.rows.num_embeddings)
        return self.rows(row) + self.cols(col)

    def after_optimizer_step(self) -> None:
        for b in self.blocks:
            if hasattr(b.attn, "span"):
                b.attn.span.constrain(b.attn)

    def keys_per_query(self) -> float:
        """Keys a query attends, averaged over the positions of a block, the heads and the layers."""
        return float(np.mean([b.attn.keys_per_query(self.block) for b in self.blocks]))

    def flops_per_token(self) -> float:
        """Forward FLOPs per predicted token (2 per multiply-accumulate): q, k, v, the output projection,
        W1 and W2 of every layer and the output layer, plus q.k and a.v over the keys each query attends
        (for a span: min(t, its effective span) at position t)."""
        c, d = self.cfg, self.cfg.d_model
        dense = c.layers * (4 * d * d + 2 * d * int(round(d * c.ff_mult))) + d * self.vocab_size
        return float(2 * (dense + c.layers * self.keys_per_query() * 2 * d))

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "params": sum(p.numel() for p in self.parameters()),
            "attn_keys_per_query": self.keys_per_query(),
            "flops_per_token": self.flops_per_token(),
        }
        spans = [b.attn.spans() for b in self.blocks]
        if all(s is not None for s in spans):
            zs = [[float(v) for v in z] for z, _ in spans]
            effs = [[float(v) for v in e] for _, e in spans]
            out.update(span_statistics(zs, effs, self.cfg.span.limit))
        return out
